"""The worker's pruning of idempotency keys past their window.

A key older than `IDEMPOTENCY_WINDOW_HOURS` no longer holds (the next event with it is new),
so its row is only storage: 190 bytes for every event submitted with a key. They are deleted
in batches of `PRUNE_BATCH`, each its own short transaction, by the index on `created_at`
(migration 0018): never one statement over a day of keys (one long transaction holding
every row it deletes) nor row by row. Not partitioned: the table's key is (owner, key), and a
unique key over partitions must contain the partition column, so partitions by time could
not keep one key once within the window.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import structlog
from servicekit.runtime import ServiceRuntime
from servicekit.worker import WorkerLoop
from sqlalchemy.ext.asyncio import AsyncEngine

from webhook_hub.producer_events.repository import prune_batch
from webhook_hub.settings import Settings

logger = structlog.get_logger(__name__)

# The loop as the worker's `/readyz` names it when it makes no progress.
LOOP = "idempotency-key-pruning"
# Keys deleted per transaction: a few milliseconds of PostgreSQL's time each.
PRUNE_BATCH = 5000


async def prune_expired_keys(
    engine: AsyncEngine,
    cutoff: datetime,
    batch: int = PRUNE_BATCH,
    keep_going: Callable[[], bool] = lambda: True,
) -> int:
    """Delete every key created before `cutoff`, `batch` at a time, while `keep_going()`;
    how many were deleted."""
    total = 0
    while keep_going():
        async with engine.begin() as connection:
            deleted = await prune_batch(connection, cutoff, batch)
        total += deleted
        if deleted < batch:
            break
    return total


def idempotency_pruning_loop(settings: Settings) -> WorkerLoop:
    """Every `IDEMPOTENCY_PRUNE_SECONDS`, the keys past the window deleted."""
    every = settings.idempotency_prune_seconds
    window = timedelta(hours=settings.idempotency_window_hours)

    async def run(runtime: ServiceRuntime, stop: asyncio.Event) -> None:
        runtime.progress.beat(LOOP, every)
        while not stop.is_set():
            try:
                deleted = await prune_expired_keys(
                    runtime.engine, datetime.now(UTC) - window, keep_going=lambda: not stop.is_set()
                )
                if deleted:
                    logger.info("expired idempotency keys deleted", keys=deleted)
                runtime.progress.beat(LOOP, every)
            except Exception as exc:
                logger.warning("idempotency key pruning failed", error=repr(exc))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), every)

    return run
