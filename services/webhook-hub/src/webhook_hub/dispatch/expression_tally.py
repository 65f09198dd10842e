"""What subscriptions' CEL filters and transforms did to events, counted, not logged one by one.

Dispatch adds to an in-memory tally (a dict update per event left out, nothing for one
sent); `expression_tally_loop` writes it every `FLUSH_SECONDS` into
`subscription_expression_tallies` (one upsert for all subscriptions that moved), adds it to
the Prometheus counter, and writes one log line per subscription whose expression failed in
the interval. The portal's subscription page reads the totals. A worker that dies loses at
most one interval of counts: they are statistics, not a record of deliveries.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import structlog
from prometheus_client import Counter
from servicekit.runtime import ServiceRuntime
from servicekit.worker import WorkerLoop
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

logger = structlog.get_logger(__name__)
LOOP = "expression-tally"
FLUSH_SECONDS = 5.0

# On the worker's /metrics: events each field left out (filter false) or failed on.
EXPRESSION_OUTCOMES = Counter(
    "webhook_expression_outcomes",
    "Events a subscription's CEL filter left out (filtered) or its filter or transform failed "
    "on (error: not delivered)",
    ["field", "outcome"],
)


@dataclass
class Counts:
    filtered: int = 0
    filter_errors: int = 0
    transform_errors: int = 0
    last_error: str | None = None
    last_error_at: datetime | None = None


@dataclass
class ExpressionTally:
    """The counts since the last flush, by subscription."""

    counts: dict[uuid.UUID, Counts] = field(default_factory=dict)

    def filtered(self, subscription_id: uuid.UUID) -> None:
        counts = self.counts.get(subscription_id)
        if counts is None:
            counts = self.counts[subscription_id] = Counts()
        counts.filtered += 1

    def failed(self, subscription_id: uuid.UUID, field: str, message: str) -> None:
        counts = self.counts.get(subscription_id)
        if counts is None:
            counts = self.counts[subscription_id] = Counts()
        if field == "filter":
            counts.filter_errors += 1
        else:
            counts.transform_errors += 1
        counts.last_error = f"{field}: {message}"[:500]
        counts.last_error_at = datetime.now(UTC)

    def take(self) -> dict[uuid.UUID, Counts]:
        taken, self.counts = self.counts, {}
        return taken


# The worker's one tally (dispatch adds, the loop flushes).
TALLY = ExpressionTally()

_UPSERT = text(
    """
    INSERT INTO subscription_expression_tallies AS t
        (subscription_id, filtered, filter_errors, transform_errors, last_error,
         last_error_at, updated_at)
    SELECT * FROM unnest(CAST(:ids AS uuid[]), CAST(:filtered AS bigint[]),
                         CAST(:filter_errors AS bigint[]), CAST(:transform_errors AS bigint[]),
                         CAST(:last_errors AS text[]), CAST(:last_error_ats AS timestamptz[]),
                         CAST(:updated AS timestamptz[]))
    ON CONFLICT (subscription_id) DO UPDATE SET
        filtered = t.filtered + excluded.filtered,
        filter_errors = t.filter_errors + excluded.filter_errors,
        transform_errors = t.transform_errors + excluded.transform_errors,
        last_error = coalesce(excluded.last_error, t.last_error),
        last_error_at = coalesce(excluded.last_error_at, t.last_error_at),
        updated_at = excluded.updated_at
    """
)


async def flush(engine: AsyncEngine, taken: dict[uuid.UUID, Counts]) -> None:
    """Add `taken` to the stored totals (ids sorted: two workers lock rows in one order)."""
    if not taken:
        return
    ids = sorted(taken)
    now = datetime.now(UTC)
    rows = [taken[i] for i in ids]
    async with engine.begin() as connection:
        await _upsert(connection, ids, rows, now)
    for subscription_id, counts in zip(ids, rows, strict=True):
        if counts.filtered:
            EXPRESSION_OUTCOMES.labels("filter", "filtered").inc(counts.filtered)
        if counts.filter_errors:
            EXPRESSION_OUTCOMES.labels("filter", "error").inc(counts.filter_errors)
        if counts.transform_errors:
            EXPRESSION_OUTCOMES.labels("transform", "error").inc(counts.transform_errors)
        if counts.filter_errors or counts.transform_errors:
            logger.warning(
                "a subscription's expression failed on events; they were not delivered",
                loop=LOOP,
                subscription_id=str(subscription_id),
                filter_errors=counts.filter_errors,
                transform_errors=counts.transform_errors,
                last_error=counts.last_error,
            )


async def _upsert(
    connection: AsyncConnection, ids: list[uuid.UUID], rows: list[Counts], now: datetime
) -> None:
    await connection.execute(
        _UPSERT,
        {
            "ids": ids,
            "filtered": [c.filtered for c in rows],
            "filter_errors": [c.filter_errors for c in rows],
            "transform_errors": [c.transform_errors for c in rows],
            "last_errors": [c.last_error for c in rows],
            "last_error_ats": [c.last_error_at for c in rows],
            "updated": [now] * len(ids),
        },
    )


async def totals_of(connection: AsyncConnection, subscription_id: uuid.UUID) -> Counts:
    """A subscription's stored totals (zeros when nothing was counted yet)."""
    row: Any = (
        await connection.execute(
            text(
                "SELECT filtered, filter_errors, transform_errors, last_error, last_error_at"
                " FROM subscription_expression_tallies WHERE subscription_id = :id"
            ),
            {"id": subscription_id},
        )
    ).first()
    return Counts() if row is None else Counts(*row)


def expression_tally_loop(every_seconds: float = FLUSH_SECONDS) -> WorkerLoop:
    """The worker loop flushing `TALLY` every `every_seconds`, and once more on stop."""

    async def run(runtime: ServiceRuntime, stop: asyncio.Event) -> None:
        runtime.progress.beat(LOOP, every_seconds)
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), every_seconds)
            taken = TALLY.take()
            try:
                await flush(runtime.engine, taken)
            except Exception as exc:
                # Given back: counted at the next round rather than lost to a blip.
                for subscription_id, counts in taken.items():
                    kept = TALLY.counts.setdefault(subscription_id, Counts())
                    kept.filtered += counts.filtered
                    kept.filter_errors += counts.filter_errors
                    kept.transform_errors += counts.transform_errors
                    kept.last_error = kept.last_error or counts.last_error
                    kept.last_error_at = kept.last_error_at or counts.last_error_at
                logger.warning("expression tally not written", loop=LOOP, error=repr(exc))
            runtime.progress.beat(LOOP, every_seconds)
            if stop.is_set():
                return

    run.__qualname__ = "expression_tally_loop"
    return run
