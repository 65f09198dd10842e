"""Issue 35's walk-through of the portal, in a real Chromium against `serve` and `worker` as
real processes (the fixtures of `test_portal_browser`): each problem a user hit, shown fixed,
axe-clean, with the before/after screenshots of the README's note."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import httpx
from servicekit.embedded.network import free_port
from servicekit.testing import HttpReceiver
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.factories import Consumer, only_test_delivery_settled, subscribe

REFUSED = "ConnectionRefusedError: [Errno 111] Connection refused"


async def add_deliveries(engine: AsyncEngine, subscription_id: str, *rows: dict[str, Any]) -> None:
    """Deliveries of `subscription_id`: each row's `status`, `age` (created this long ago),
    and optionally `event_type`, `attempts`, `next_in` (next attempt this far ahead),
    `error`, `code` (the last answer)."""
    async with engine.begin() as connection:
        for row in rows:
            await connection.execute(
                text(
                    "INSERT INTO deliveries (id, subscription_id, event_id, event_type, payload,"
                    " event_time, status, attempts, created_at, next_attempt_at,"
                    " last_attempt_at, last_error, last_status_code) VALUES (:id, :sid, :eid,"
                    " :type, CAST(:payload AS json), now(), CAST(:status AS text), CAST(:attempts AS int), now() - :age,"
                    " CASE WHEN CAST(:status AS text) = 'pending' THEN now() + :next_in END,"
                    " CASE WHEN CAST(:attempts AS int) > 0 THEN now() - :age / 2 END, :error, :code)"
                ),
                {
                    "id": uuid.uuid4(),
                    "sid": subscription_id,
                    "eid": row.get("event_id", uuid.uuid4()),
                    "type": row.get("event_type", "order.paid"),
                    "payload": row.get("payload", '{"order_id": 1042}'),
                    "status": row["status"],
                    "attempts": row.get("attempts", 1),
                    "age": row["age"],
                    "next_in": row.get("next_in", timedelta(minutes=7)),
                    "error": row.get("error"),
                    "code": row.get("code"),
                },
            )


async def set_health(
    engine: AsyncEngine, subscription_id: str, failures: int, last_success: timedelta | None
) -> None:
    async with engine.begin() as connection:
        await connection.execute(
            text(
                "UPDATE subscriptions SET failure_count = :failures,"
                " last_delivery_at = now() - CAST(:age AS interval) WHERE id = :sid"
            ),
            {"sid": subscription_id, "failures": failures, "age": last_success},
        )


async def filter_scenario(
    hub: httpx.AsyncClient, engine: AsyncEngine, consumer: Consumer, receiver: HttpReceiver
) -> str:
    """An endpoint with a few deliveries of two event types over the last hours."""
    created = await subscribe(
        hub, consumer.headers, f"{receiver.url}/orders", ["order.paid", "order.created"]
    )
    await only_test_delivery_settled(engine, created["id"])
    hour = timedelta(hours=1)
    await add_deliveries(
        engine,
        created["id"],
        *[{"status": "succeeded", "age": hour * n, "code": 200} for n in (1, 3, 4)],
        *[
            {"status": "succeeded", "age": hour * n, "event_type": "order.created", "code": 200}
            for n in (2, 5)
        ],
    )
    return str(created["id"])


async def down_receiver_scenario(
    hub: httpx.AsyncClient, engine: AsyncEngine, consumer: Consumer
) -> str:
    """An endpoint whose receiver is down: deliveries waiting for their next attempt, one
    that gave up."""
    port = free_port()  # nothing listens there
    created = await subscribe(
        hub, consumer.headers, f"http://127.0.0.1:{port}/hooks", description="Warehouse"
    )
    await only_test_delivery_settled(engine, created["id"])
    error = REFUSED
    minute = timedelta(minutes=1)
    await add_deliveries(
        engine,
        created["id"],
        {"status": "failed", "age": minute * 50, "attempts": 8, "error": error},
        *[
            {"status": "pending", "age": minute * n, "attempts": 3, "error": error}
            for n in (4, 9, 15)
        ],
    )
    await set_health(engine, created["id"], 11, None)
    return str(created["id"])


async def health_scenario(
    hub: httpx.AsyncClient, engine: AsyncEngine, consumer: Consumer, receiver: HttpReceiver
) -> tuple[str, str]:
    """Two failing endpoints: one that succeeded earlier today and fails now (its deliveries
    waiting for retries), one that never succeeded."""
    hour = timedelta(hours=1)
    earlier = await subscribe(hub, consumer.headers, f"{receiver.url}/earlier")
    await only_test_delivery_settled(engine, earlier["id"])
    await add_deliveries(
        engine,
        earlier["id"],
        *[{"status": "succeeded", "age": hour * 3 + timedelta(minutes=n)} for n in range(5)],
        *[
            {"status": "pending", "age": timedelta(minutes=n), "attempts": 1, "code": 503}
            for n in (5, 10, 15, 20)
        ],
    )
    await set_health(engine, earlier["id"], 4, hour * 3)
    never = await subscribe(hub, consumer.headers, f"{receiver.url}/never")
    await only_test_delivery_settled(engine, never["id"])
    await add_deliveries(
        engine,
        never["id"],
        *[{"status": "pending", "age": timedelta(minutes=n), "code": 500} for n in (3, 6)],
    )
    await set_health(engine, never["id"], 2, None)
    return str(earlier["id"]), str(never["id"])
