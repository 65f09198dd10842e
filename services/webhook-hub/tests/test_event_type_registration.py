"""`POST /webhooks/event-types`: producers outside NATS register their own types; each type
records its owner, so only that owner may submit events of it."""

from __future__ import annotations

import httpx
import pytest
from servicekit.cli import ServiceCLI
from sqlalchemy.ext.asyncio import AsyncEngine
from webhook_hub.app import create_app
from webhook_hub.cli import MIGRATIONS, cli
from webhook_hub.settings import Settings
from webhook_hub.worker import run

from tests.factories import Consumer, make_consumer
from tests.factories import unique_type_name as unique


def declaration(name: str, **extra: object) -> dict[str, object]:
    return {
        "name": name,
        "description": "An invoice was paid",
        "example_payload": {"id": 1},
        **extra,
    }


async def register(
    client: httpx.AsyncClient, who: Consumer, name: str, **extra: object
) -> httpx.Response:
    """`who` registers the type `name` (`extra`: other fields of its declaration)."""
    return await client.post(
        "/webhooks/event-types", json=declaration(name, **extra), headers=who.headers
    )


async def subscribe(client: httpx.AsyncClient, who: Consumer, name: str) -> httpx.Response:
    """`who` subscribes an endpoint to the type `name`."""
    return await client.post(
        "/webhooks/subscriptions",
        json={"endpoint_url": "http://127.0.0.1:9/x", "events": [name]},
        headers=who.headers,
    )


async def test_a_registered_type_is_listed_with_its_owner_and_can_be_subscribed_to(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    invoice_settled = unique("invoice.settled")
    alice = await make_consumer(db_engine, "admin")
    response = await register(client, alice, invoice_settled)
    assert response.status_code == 201
    assert response.json()["owner"] == alice.owner
    listed = await client.get("/webhooks/event-types", headers=alice.headers)
    mine = next(t for t in listed.json()["data"] if t["name"] == invoice_settled)
    assert mine["owner"] == alice.owner
    assert mine["is_active"] is True
    subscribed = await subscribe(client, alice, invoice_settled)
    assert subscribed.status_code == 201


async def test_platform_types_are_listed_without_an_owner(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    reader = await make_consumer(db_engine, "read")
    listed = await client.get("/webhooks/event-types", headers=reader.headers)
    paid = next(t for t in listed.json()["data"] if t["name"] == "order.paid")
    assert paid["owner"] is None


async def test_registering_again_updates_the_owners_own_type(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    memo_sent = unique("memo.sent")
    alice = await make_consumer(db_engine, "admin")
    await register(client, alice, memo_sent)
    again = await register(client, alice, memo_sent, description="changed")
    assert again.status_code == 200
    assert again.json()["description"] == "changed"


async def test_a_platform_type_or_another_owners_type_cannot_be_taken(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    bill_sent = unique("bill.sent")
    alice = await make_consumer(db_engine, "admin")
    bob = await make_consumer(db_engine, "admin")
    await register(client, bob, bill_sent)
    for name in ("order.paid", bill_sent, "webhook.test", "subscription.disabled"):
        response = await register(client, alice, name)
        assert response.status_code == 409, name
        assert response.json()["code"] == "event_type_taken"


async def test_other_consumers_types_are_not_listed_or_subscribable(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    secret_plan = unique("secret.plan")
    alice = await make_consumer(db_engine, "admin")
    bob = await make_consumer(db_engine, "admin")
    await register(client, bob, secret_plan)
    listed = await client.get("/webhooks/event-types", headers=alice.headers)
    assert secret_plan not in {t["name"] for t in listed.json()["data"]}
    subscribed = await subscribe(client, alice, secret_plan)
    assert subscribed.status_code == 422


async def test_registering_needs_the_admin_level(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    note_sent = unique("note.sent")
    writer = await make_consumer(db_engine, "write")
    response = await register(client, writer, note_sent)
    assert response.status_code == 403


async def test_a_malformed_name_is_422(client: httpx.AsyncClient, db_engine: AsyncEngine) -> None:
    alice = await make_consumer(db_engine, "admin")
    response = await register(client, alice, "NoDot")
    assert response.status_code == 422


async def test_the_api_never_issues_operator_keys(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    for level in ("admin", "operator"):
        holder = await make_consumer(db_engine, level)
        response = await client.post(
            "/webhooks/api-keys", json={"level": "operator"}, headers=holder.headers
        )
        assert response.status_code == 422, level


def test_only_the_hubs_cli_issues_operator_keys() -> None:
    arguments = ["api-keys", "create", "--owner", "ops", "--level", "operator"]
    assert cli.parser().parse_args(arguments).level == "operator"
    other = ServiceCLI(
        name="other", settings=Settings, app=create_app, worker=run, migrations=MIGRATIONS
    )
    with pytest.raises(SystemExit):
        other.parser().parse_args(arguments)
