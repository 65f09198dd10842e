"""`outbox_backlog`: committed events the relay has not published yet, measured by every
worker (each runs a relay). A backlog that grows while the rate of publications stays flat
means NATS is down or the relay cannot keep up; the event-flow dashboard starts from it."""

from __future__ import annotations

import asyncio

import structlog
from prometheus_client import Gauge
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from servicekit.runtime import ServiceRuntime

logger = structlog.get_logger(__name__)

OUTBOX_BACKLOG = Gauge(
    "outbox_backlog", "Outbox events committed and not yet published to NATS (unsent rows)"
)
# Often enough for a 15-30 s scrape interval; a count over the partial set of unsent rows.
MEASURE_SECONDS = 5.0
_COUNT_UNSENT = text("SELECT count(*) FROM outbox_events WHERE published_at IS NULL")


async def measure_outbox_backlog(engine: AsyncEngine) -> int:
    """Count the unsent rows and set the gauge to it; the count."""
    async with engine.connect() as conn:
        unsent = int((await conn.execute(_COUNT_UNSENT)).scalar_one())
    OUTBOX_BACKLOG.set(unsent)
    return unsent


async def outbox_backlog_loop(runtime: ServiceRuntime, stop: asyncio.Event) -> None:
    while not stop.is_set():
        try:
            await measure_outbox_backlog(runtime.engine)
        except Exception as exc:  # the database is away: the gauge keeps its last value
            logger.warning("outbox backlog not measured", error=repr(exc))
        try:
            await asyncio.wait_for(stop.wait(), timeout=MEASURE_SECONDS)
        except TimeoutError:
            continue
