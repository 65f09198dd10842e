"""A poison item never stops a batch (issue 30): dispatch with a subscription whose row
raises, end to end on the real worker, NATS and Postgres."""

from __future__ import annotations

import asyncio

import httpx
from nats.js import JetStreamContext
from servicekit.testing import HttpReceiver
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine
from webhook_hub.settings import Settings

from tests.factories import make_consumer, publish_event, subscribe


async def test_a_subscription_whose_row_raises_does_not_stop_dispatch_for_the_others(
    worker: Settings,
    client: httpx.AsyncClient,
    db_engine: AsyncEngine,
    http_receiver: HttpReceiver,
    js: JetStreamContext,
) -> None:
    consumer = await make_consumer(db_engine, "write")
    broken = await subscribe(
        client, consumer.headers, f"{http_receiver.url}/broken", ["order.paid"]
    )
    await subscribe(client, consumer.headers, f"{http_receiver.url}/healthy", ["order.paid"])
    # A rotation stored at the calendar's end: its transition window cannot be computed.
    async with db_engine.begin() as conn:
        await conn.execute(
            text(
                "UPDATE subscriptions SET secret_old = secret,"
                " secret_rotated_at = '9999-12-31 23:59:00+00' WHERE id = :id"
            ),
            {"id": broken["id"]},
        )
    events = [await publish_event(js, "order.paid", {"n": n}) for n in range(3)]

    deadline = asyncio.get_running_loop().time() + 15
    while asyncio.get_running_loop().time() < deadline:
        healthy = [
            r for r in http_receiver.requests if r.path == "/healthy" and b"order.paid" in r.body
        ]
        if len(healthy) >= len(events):
            break
        await asyncio.sleep(0.05)
    assert len(healthy) == len(events)
    assert not [
        r for r in http_receiver.requests if r.path == "/broken" and b"order.paid" in r.body
    ]
