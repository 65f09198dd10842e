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
OUTBOX_SET_ASIDE = Gauge(
    "outbox_set_aside", "Outbox events the relay set aside: they cannot be published (kept)"
)
# Often enough for a 15-30 s scrape interval; a count over the partial set of unsent rows.
MEASURE_SECONDS = 5.0
_COUNT_UNSENT = text(
    "SELECT count(*) FILTER (WHERE failed_at IS NULL), count(*) FILTER (WHERE failed_at IS NOT NULL)"
    " FROM outbox_events WHERE published_at IS NULL"
)
LOOP = "outbox-backlog"


async def measure_outbox_backlog(engine: AsyncEngine) -> int:
    """Count the unsent rows (and those set aside) and set the gauges; the unsent count."""
    async with engine.connect() as conn:
        unsent, set_aside = (await conn.execute(_COUNT_UNSENT)).one()
    OUTBOX_BACKLOG.set(unsent)
    OUTBOX_SET_ASIDE.set(set_aside)
    return int(unsent)


async def outbox_backlog_loop(runtime: ServiceRuntime, stop: asyncio.Event) -> None:
    runtime.progress.beat(LOOP, MEASURE_SECONDS)
    while not stop.is_set():
        try:
            await measure_outbox_backlog(runtime.engine)
            runtime.progress.beat(LOOP, MEASURE_SECONDS)
        except Exception as exc:  # the database is away: the gauge keeps its last value
            logger.warning("outbox backlog not measured", error=repr(exc))
        try:
            await asyncio.wait_for(stop.wait(), timeout=MEASURE_SECONDS)
        except TimeoutError:
            continue
