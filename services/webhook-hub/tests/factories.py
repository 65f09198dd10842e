"""Test data for webhook-hub."""

from __future__ import annotations

import asyncio
import html
import json
import re
import uuid
from datetime import timedelta
from typing import Any

import httpx
from nats.js import JetStreamContext
from servicekit.auth import AccessLevel
from servicekit.auth.repository import ApiKeyRepository
from servicekit.db.engine import create_session_factory
from servicekit.events import CloudEvent
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine


class Consumer:
    """A consumer with a key; `headers` authenticates as it."""

    def __init__(self, owner: str, key: str) -> None:
        self.owner = owner
        self.key = key

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"}


async def make_consumer(
    engine: AsyncEngine, level: str = "admin", email: str | None = None, owner: str | None = None
) -> Consumer:
    owner = owner or f"consumer-{uuid.uuid4().hex[:8]}"
    async with create_session_factory(engine)() as session, session.begin():
        _, key = await ApiKeyRepository(session).create(
            prefix="whk", owner=owner, level=AccessLevel(level), email=email
        )
    return Consumer(owner, key)


def unique_type_name(name: str) -> str:
    """`name` made unique: type names are global and the tests share one database."""
    return f"{name}-{uuid.uuid4().hex[:8]}"


def subscription_body(url: str, events: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    return {"endpoint_url": url, "events": events or ["order.paid"], **extra}


async def publish_event(
    js: JetStreamContext, event_type: str, data: dict[str, Any], tenant: str | None = None
) -> CloudEvent:
    event = CloudEvent(source="tests", type=event_type, data=data, tenant=tenant)
    await js.publish(event.subject, event.to_json(), headers={"Nats-Msg-Id": str(event.id)})
    return event


async def subscribe(
    client: httpx.AsyncClient,
    headers: dict[str, str],
    url: str,
    events: list[str] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """Create a subscription through the API; the 201 body."""
    response = await client.post(
        "/webhooks/subscriptions", json=subscription_body(url, events, **extra), headers=headers
    )
    assert response.status_code == 201, response.text
    return dict(response.json())


async def deliveries_of(
    client: httpx.AsyncClient, headers: dict[str, str], subscription_id: str, query: str = ""
) -> list[dict[str, Any]]:
    """One page of a subscription's delivery log (`query`: `status=...`, `event_type=...`)."""
    response = await client.get(
        f"/webhooks/subscriptions/{subscription_id}/deliveries?{query}", headers=headers
    )
    return list(response.json()["data"])


async def recorded_deliveries(
    client: httpx.AsyncClient,
    headers: dict[str, str],
    subscription_id: str,
    query: str,
    count: int,
    timeout: float = 10.0,
) -> list[dict[str, Any]]:
    """`deliveries_of` once it holds `count` deliveries (or after `timeout` seconds): an
    outcome is recorded a flush after its answer, later than that on a loaded machine."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        found = await deliveries_of(client, headers, subscription_id, query)
        if len(found) >= count or asyncio.get_running_loop().time() > deadline:
            return found
        await asyncio.sleep(0.1)


async def delivery_detail(
    client: httpx.AsyncClient, headers: dict[str, str], delivery_id: str
) -> dict[str, Any]:
    response = await client.get(f"/webhooks/deliveries/{delivery_id}", headers=headers)
    return dict(response.json())


def csrf_in(html: str) -> str:
    """The CSRF token of a page's form."""
    found = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert found, "no CSRF field on the page"
    return found.group(1)


async def signed_in(client: httpx.AsyncClient, consumer: Consumer) -> str:
    """Sign `client` in with the consumer's key; a CSRF token for its forms."""
    form = await client.get("/portal/login")
    token = csrf_in(form.text)
    response = await client.post(
        "/portal/login", data={"api_key": consumer.key, "next": "", "csrf_token": token}
    )
    assert response.status_code == 303
    return token


def chart_of(page: str, chart_id: str) -> dict[str, Any]:
    """The JSON a portal page hands `charts.js` for the chart with this id."""
    found = re.search(rf'id="{chart_id}" data-chart=\'([^\']+)\'', page)
    assert found, chart_id
    return dict(json.loads(html.unescape(found.group(1))))


async def set_deliveries(
    engine: AsyncEngine, subscription_id: str, rows: list[tuple[str, timedelta]]
) -> None:
    """Deliveries of `subscription_id` with these statuses, created this long ago."""
    async with engine.begin() as connection:
        for status, age in rows:
            await connection.execute(
                text(
                    "INSERT INTO deliveries (id, subscription_id, event_id, event_type, payload,"
                    " event_time, status, attempts, created_at) VALUES (:id, :sid, :eid,"
                    " 'order.paid', '{}', now(), :status, 1, now() - :age)"
                ),
                {
                    "id": uuid.uuid4(),
                    "sid": subscription_id,
                    "eid": uuid.uuid4(),
                    "status": status,
                    "age": age,
                },
            )


async def only_test_delivery_settled(engine: AsyncEngine, subscription_id: str) -> None:
    """The creation's test delivery, marked succeeded, so counts below are only the test's."""
    async with engine.begin() as connection:
        await connection.execute(
            text(
                "UPDATE deliveries SET status = 'succeeded', created_at = now() - interval '30 days'"
                " WHERE subscription_id = :sid"
            ),
            {"sid": subscription_id},
        )
