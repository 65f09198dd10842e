"""The worker's pruning of idempotency keys past their window.

A key older than `IDEMPOTENCY_WINDOW_HOURS` no longer holds (the next event with it is new),
so its row is only storage: 190 bytes for every event submitted with a key. They are deleted
in batches of `PRUNE_BATCH`, each its own short transaction, by the index on `created_at`
(migration 0019), by servicekit.retention's loop: never one statement over a day of keys
(one long transaction holding every row it deletes) nor row by row. Not partitioned: the table's key is (owner, key), and a
unique key over partitions must contain the partition column, so partitions by time could
not keep one key once within the window.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from servicekit.retention import Progress, delete_in_batches, pruning_loop
from servicekit.worker import WorkerLoop
from sqlalchemy.ext.asyncio import AsyncEngine

from webhook_hub.producer_events.repository import PRUNE_EXPIRED_KEYS
from webhook_hub.settings import Settings

# The loop as the worker's `/readyz` names it when it makes no progress.
LOOP = "idempotency-key-pruning"
# Keys deleted per transaction: a few milliseconds of PostgreSQL's time each.
PRUNE_BATCH = 5000


async def prune_expired_keys(
    engine: AsyncEngine,
    cutoff: datetime,
    batch: int = PRUNE_BATCH,
    progress: Progress = lambda: None,
) -> int:
    """Delete every key created before `cutoff`, `batch` at a time; how many were deleted."""
    return await delete_in_batches(
        engine, PRUNE_EXPIRED_KEYS, {"cutoff": cutoff}, batch=batch, progress=progress
    )


def idempotency_pruning_loop(settings: Settings) -> WorkerLoop:
    """Every `IDEMPOTENCY_PRUNE_SECONDS`, the keys past the window deleted."""
    window = timedelta(hours=settings.idempotency_window_hours)

    async def prune(engine: AsyncEngine, now: datetime, progress: Progress) -> int:
        return await prune_expired_keys(engine, now - window, progress=progress)

    return pruning_loop(LOOP, prune, settings.idempotency_prune_seconds)
