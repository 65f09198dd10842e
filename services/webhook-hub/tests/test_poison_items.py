"""A poison item never stops a batch (issue 30): dispatch with a subscription whose row
raises, end to end on the real worker, NATS and Postgres; the portal's chart rollup with an
hour PostgreSQL refuses."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import httpx
from nats.js import JetStreamContext
from servicekit.testing import HttpReceiver
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlmodel.ext.asyncio.session import AsyncSession
from structlog.testing import capture_logs
from webhook_hub.models import Subscription
from webhook_hub.portal.charts import HourStats, truncate
from webhook_hub.portal.stats import PortalStatsService
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


async def test_a_rollup_hour_postgres_refuses_is_left_out_and_the_others_are_stored(
    db_engine: AsyncEngine, committed_subscription: Subscription
) -> None:
    now = datetime.now(UTC)
    first, second = (truncate(now, "hour") - timedelta(hours=n) for n in (30, 31))
    gone = uuid.uuid4()  # an endpoint deleted between the page's read and its store
    hours = {
        (committed_subscription.id, first): HourStats(succeeded=3, attempts=3),
        (gone, first): HourStats(succeeded=1, attempts=1),
        (committed_subscription.id, second): HourStats(failed=2, attempts=4),
    }
    with capture_logs() as lines:
        async with AsyncSession(db_engine) as session, session.begin():
            await PortalStatsService(session).keep_settled(hours)
    async with db_engine.connect() as conn:
        stored = (
            await conn.execute(
                text(
                    "SELECT subscription_id, hour_start, succeeded, failed FROM delivery_hour_stats"
                    " WHERE subscription_id = ANY(:ids) ORDER BY hour_start DESC"
                ),
                {"ids": [committed_subscription.id, gone]},
            )
        ).all()
    assert [tuple(row) for row in stored] == [
        (committed_subscription.id, first, 3, 0),
        (committed_subscription.id, second, 0, 2),
    ]
    errors = [line for line in lines if line["log_level"] == "error"]
    assert [(e["loop"], e["subscription_id"]) for e in errors] == [("chart rollup", str(gone))]
