"""Run webhooks: the request webhook-hub receives over NATS carries the client as owner and only
run event types. (The full delivery path is tested end to end in tests-e2e.)"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import nats
import pytest
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.factories import make_client


class HubRequests:
    """What webhook-hub would receive on `hub.subscriptions.*`, answered as it answers."""

    def __init__(self) -> None:
        self.received: list[tuple[str, dict[str, Any]]] = []

    async def handle(self, msg: Msg) -> None:
        payload = json.loads(msg.data)
        action = msg.subject.rsplit(".", 1)[-1]
        self.received.append((action, payload))
        if action == "create":
            reply = {"ok": True, "subscription": {"id": str(uuid.uuid4()), "secret": "s" * 32}}
        else:
            reply = {"ok": True}
        await msg.respond(json.dumps(reply).encode())


@pytest.fixture
async def hub(nats_url: str) -> AsyncIterator[HubRequests]:
    connection: NatsClient = await nats.connect(nats_url)
    requests = HubRequests()
    subscription = await connection.subscribe("hub.subscriptions.*", cb=requests.handle)
    yield requests
    await subscription.unsubscribe()
    await connection.close()


async def test_registration_asks_webhook_hub_for_the_clients_run_events(
    client: httpx.AsyncClient, db_engine: AsyncEngine, hub: HubRequests
) -> None:
    who = await make_client(db_engine, "write")
    response = await client.post(
        "/api/v1/webhooks",
        json={"url": "https://client.example/hooks", "events": ["run.completed", "run.failed"]},
        headers=who.headers,
    )
    assert response.status_code == 201
    body = response.json()
    assert set(body) == {"id", "url", "events", "secret", "created_at"}
    assert len(body["secret"]) == 32
    action, request = hub.received[0]
    assert action == "create"
    assert request == {
        "source": "scraper-manager",
        "tenant": who.owner,
        "endpoint_url": "https://client.example/hooks",
        "events": ["run.completed", "run.failed"],
        "email": None,
    }
    listed = (await client.get("/api/v1/webhooks", headers=who.headers)).json()
    assert [w["id"] for w in listed] == [body["id"]]
    assert "secret" not in listed[0]


async def test_unknown_event_names_are_422_and_nothing_is_asked(
    client: httpx.AsyncClient, db_engine: AsyncEngine, hub: HubRequests
) -> None:
    who = await make_client(db_engine, "write")
    response = await client.post(
        "/api/v1/webhooks",
        json={"url": "https://client.example/hooks", "events": ["order.paid"]},
        headers=who.headers,
    )
    assert response.status_code == 422
    assert response.json()["invalid_events"] == ["order.paid"]
    assert hub.received == []


async def test_deleting_a_webhook_asks_the_hub_and_another_clients_is_404(
    client: httpx.AsyncClient, db_engine: AsyncEngine, hub: HubRequests
) -> None:
    owner = await make_client(db_engine, "admin")
    stranger = await make_client(db_engine, "admin")
    created = (
        await client.post(
            "/api/v1/webhooks",
            json={"url": "https://client.example/hooks", "events": ["run.completed"]},
            headers=owner.headers,
        )
    ).json()
    assert (
        await client.delete(f"/api/v1/webhooks/{created['id']}", headers=stranger.headers)
    ).status_code == 404
    assert (
        await client.delete(f"/api/v1/webhooks/{created['id']}", headers=owner.headers)
    ).status_code == 204
    assert hub.received[-1] == (
        "delete",
        {"source": "scraper-manager", "tenant": owner.owner, "id": created["id"]},
    )


async def test_without_webhook_hub_the_answer_is_503(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "write")
    response = await client.post(
        "/api/v1/webhooks",
        json={"url": "https://client.example/hooks", "events": ["run.completed"]},
        headers=who.headers,
    )
    assert response.status_code == 503
