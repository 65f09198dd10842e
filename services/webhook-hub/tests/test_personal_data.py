"""Finding 20: event types carry a visibility. Personal-data types (`inquiry.created`: other
visitors' names, e-mails and messages) reach only owners an operator approved, or the one
owner an event is for (its `tenant`)."""

from __future__ import annotations

import asyncio

import httpx
from nats.js import JetStreamContext
from servicekit.testing import HttpReceiver
from sqlalchemy.ext.asyncio import AsyncEngine
from webhook_hub.cli import cli
from webhook_hub.settings import Settings

from tests.factories import (
    consumer_subscribed,
    create_subscription,
    make_consumer,
    publish_event,
    subscribe,
)

PERSONAL = "inquiry.created"


def approve(settings: Settings, owner: str, *, revoke: bool = False) -> None:
    """What an operator runs: `webhook-hub consumers approve-personal-data --owner NAME`."""
    arguments = ["consumers", "approve-personal-data", "--owner", owner]
    args = cli.parser().parse_args([*arguments, "--revoke"] if revoke else arguments)
    command = next(extra for extra in cli._extra if extra.name == "consumers")
    assert command.run(settings, args) == 0


async def test_personal_data_types_are_listed_as_such(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    reader = await make_consumer(db_engine, "read")
    listed = (await client.get("/webhooks/event-types", headers=reader.headers)).json()["data"]
    visibility = {t["name"]: t["visibility"] for t in listed}
    assert visibility[PERSONAL] == "personal"
    assert visibility["order.paid"] == "public"


async def test_subscribing_to_personal_data_without_approval_is_403(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    consumer = await make_consumer(db_engine, "write")
    response = await create_subscription(
        client, consumer.headers, "http://127.0.0.1:9/x", ["order.paid", PERSONAL]
    )
    assert response.status_code == 403
    body = response.json()
    assert body["code"] == "personal_data_not_approved"
    assert body["personal_events"] == [PERSONAL]
    assert "approv" in body["error"]


async def test_adding_personal_data_by_patch_without_approval_is_403(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    consumer, created = await consumer_subscribed(
        client, db_engine, "http://127.0.0.1:9/x", ["order.paid"]
    )
    response = await client.patch(
        f"/webhooks/subscriptions/{created['id']}",
        json={"events": [PERSONAL]},
        headers=consumer.headers,
    )
    assert response.status_code == 403


async def test_an_approved_owner_may_subscribe_to_personal_data(
    client: httpx.AsyncClient, db_engine: AsyncEngine, service_settings: Settings
) -> None:
    consumer = await make_consumer(db_engine, "write")
    await asyncio.to_thread(approve, service_settings, consumer.owner)
    await subscribe(client, consumer.headers, "http://127.0.0.1:9/x", [PERSONAL])


async def test_personal_data_reaches_approved_owners_and_the_events_own_tenant_only(
    worker: Settings,
    client: httpx.AsyncClient,
    db_engine: AsyncEngine,
    http_receiver: HttpReceiver,
    js: JetStreamContext,
) -> None:
    approved = await make_consumer(db_engine, "write")
    await asyncio.to_thread(approve, worker, approved.owner)
    unapproved = await make_consumer(db_engine, "write")
    revoked = await make_consumer(db_engine, "write")
    await asyncio.to_thread(approve, worker, revoked.owner)
    await subscribe(client, approved.headers, f"{http_receiver.url}/approved", [PERSONAL])
    await subscribe(client, unapproved.headers, f"{http_receiver.url}/wildcard", ["*"])
    await subscribe(client, revoked.headers, f"{http_receiver.url}/revoked", [PERSONAL])
    await asyncio.to_thread(approve, worker, revoked.owner, revoke=True)
    await publish_event(js, PERSONAL, {"id": 1, "name": "Ada", "email": "ada@example.com"})
    await publish_event(js, PERSONAL, {"id": 2, "name": "Own"}, tenant=unapproved.owner)
    await publish_event(js, "order.paid", {"id": 3})
    await asyncio.sleep(1.5)
    received = {
        (r.path, r.body.split(b'"id":', 1)[1][:1].decode())
        for r in http_receiver.requests
        if r.method == "POST" and b"webhook.test" not in r.body
    }
    assert ("/approved", "1") in received
    assert ("/wildcard", "2") in received  # its own tenant's event
    assert ("/wildcard", "3") in received  # a public type
    assert ("/wildcard", "1") not in received
    assert not any(path == "/revoked" for path, _ in received)


async def test_an_operator_key_approves_an_owner_over_the_api(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    operator = await make_consumer(db_engine, "operator")
    consumer = await make_consumer(db_engine, "write")
    path = f"/webhooks/consumers/{consumer.owner}/personal-data-approval"
    response = await client.put(path, json={"approved": True}, headers=operator.headers)
    assert response.status_code == 200
    assert response.json() == {"owner": consumer.owner, "approved": True}
    await subscribe(client, consumer.headers, "http://127.0.0.1:9/x", [PERSONAL])


async def test_a_consumers_admin_key_cannot_approve_itself(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    admin = await make_consumer(db_engine, "admin")
    response = await client.put(
        f"/webhooks/consumers/{admin.owner}/personal-data-approval",
        json={"approved": True},
        headers=admin.headers,
    )
    assert response.status_code == 403
