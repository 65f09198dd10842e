"""The worker's upkeep of the delivery log's partitions (decided in partitions.py), and the
pruning of the portal's hourly rollup.

Each round, under a session advisory lock (workers that do not get it skip the round: one
maintains at a time), for `deliveries` and `delivery_attempts`:

1. Leftovers of a round cut off are finished: a partition left "detach pending" is
   finalised, a table detached and not dropped is dropped (its pending deliveries written
   back first).
2. The partitions `partitions.plan` asks for are created: an empty table LIKE the parent,
   then ATTACHed (SHARE UPDATE EXCLUSIVE on the parent, which writes and reads pass; CREATE
   TABLE ... PARTITION OF would take ACCESS EXCLUSIVE).
3. Expired partitions are dropped whole: for `deliveries`, their pending deliveries are
   first filed under the current partition (store.move_pending: a retry outlives its
   partition, same id and schedule); a partition that still holds a leased one waits for the
   next round. Then DETACH ... CONCURRENTLY (no lock that stops the log's readers or
   writers), whatever became pending meanwhile written back, and DROP.

No statement deletes rows of the log.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import structlog
from servicekit.retention import Progress, delete_in_batches, pruning_loop
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from webhook_hub.delivery_engine.store import move_pending, restore_pending
from webhook_hub.partitions import (
    Layout,
    Partition,
    bound_literal,
    parse_bounds,
    plan,
)
from webhook_hub.settings import Settings

if TYPE_CHECKING:
    from servicekit.runtime import ServiceRuntime
    from servicekit.worker import WorkerLoop

logger = structlog.get_logger(__name__)

LOOP = "delivery-log-partitions"
ROLLUP_LOOP = "delivery-rollup-retention"
# pg_try_advisory_lock's key: one maintainer at a time, whichever worker.
LOCK_KEY = 0x5745_4248_4F4F_4B53 & 0x7FFF_FFFF_FFFF_FFFF
# Partitioned tables, and whether theirs hold deliveries (pending ones are moved, not dropped).
TABLES = (("deliveries", True), ("delivery_attempts", False))
# Waiting for a lock longer than this fails the step (tried again next round) rather than
# queueing the log's readers and writers behind it.
LOCK_TIMEOUT = "5s"

_PARTITIONS = text(
    """
    SELECT c.relname, pg_get_expr(c.relpartbound, c.oid), i.inhdetachpending
    FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
    WHERE i.inhparent = CAST(:table AS regclass)
    """
)
_DETACHED = text(
    """
    SELECT relname FROM pg_class
    WHERE relkind = 'r' AND NOT relispartition
      AND relnamespace = CAST(current_schema() AS regnamespace) AND relname ~ :pattern
    """
)
_PRUNE_ROLLUP = text(
    """
    DELETE FROM delivery_hour_stats WHERE (subscription_id, hour_start) IN (
        SELECT subscription_id, hour_start FROM delivery_hour_stats
        WHERE hour_start < :cutoff
        ORDER BY hour_start
        LIMIT :batch
        FOR UPDATE SKIP LOCKED
    )
    """
)


@dataclass
class Round:
    """What one round did (for its log line and the tests)."""

    locked: bool = True
    created: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    moved: int = 0
    postponed: list[str] = field(default_factory=list)


def interval_of(layout: Layout) -> float:
    """Seconds between rounds: a quarter of a width (a minute's partitions are made well
    ahead), at most five minutes."""
    return min(layout.width / 4, timedelta(minutes=5)).total_seconds()


async def partitions_of(
    connection: AsyncConnection, table: str
) -> tuple[list[Partition], list[str]]:
    """The partitions of `table` whose bounds read as a time range, and the names of those
    left "detach pending"."""
    rows = (await connection.execute(_PARTITIONS, {"table": table})).all()
    found: list[Partition] = []
    pending: list[str] = []
    for name, expression, detaching in rows:
        if detaching:
            pending.append(name)
            continue
        bounds = parse_bounds(expression or "")
        if bounds is None:
            logger.warning("partition with bounds not of a time range", loop=LOOP, name=name)
            continue
        found.append(Partition(name, *bounds))
    return found, pending


async def maintain(
    engine: AsyncEngine, layout: Layout, now: datetime, *, lock_key: int = LOCK_KEY
) -> Round:
    """One round (see the module's description) for both tables, at `now`."""
    done = Round()
    async with engine.connect() as raw:
        connection = await raw.execution_options(isolation_level="AUTOCOMMIT")
        if not await connection.scalar(text("SELECT pg_try_advisory_lock(:k)"), {"k": lock_key}):
            done.locked = False
            return done
        try:
            # Bounds read and written in UTC; a lock not had soon is tried next round.
            await connection.execute(text("SET TIME ZONE 'UTC'"))
            await connection.execute(text(f"SET lock_timeout = '{LOCK_TIMEOUT}'"))
            for table, holds_deliveries in TABLES:
                await _table_round(engine, connection, table, holds_deliveries, layout, now, done)
        finally:
            await connection.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": lock_key})
    return done


async def _table_round(
    engine: AsyncEngine,
    connection: AsyncConnection,
    table: str,
    holds_deliveries: bool,
    layout: Layout,
    now: datetime,
    done: Round,
) -> None:
    target = layout.slot_of(now)
    existing, detaching = await partitions_of(connection, table)
    for name in detaching:
        await connection.execute(text(f"ALTER TABLE {table} DETACH PARTITION {name} FINALIZE"))
        await _drop_detached(engine, name, holds_deliveries, target)
        done.dropped.append(name)
    pattern = f"^{table}_(p[0-9]{{8}}_[0-9]{{4}}|legacy)$"
    for (name,) in (await connection.execute(_DETACHED, {"pattern": pattern})).all():
        await _drop_detached(engine, name, holds_deliveries, target)
        done.dropped.append(name)
    decided = plan(table, existing, now, layout)
    for name, lower, upper in decided.create:
        await connection.execute(
            text(
                f"CREATE TABLE IF NOT EXISTS {name}"
                f" (LIKE {table} INCLUDING DEFAULTS INCLUDING CONSTRAINTS)"
            )
        )
        await connection.execute(
            text(
                f"ALTER TABLE {table} ATTACH PARTITION {name}"
                f" FOR VALUES FROM ({bound_literal(lower)}) TO ({bound_literal(upper)})"
            )
        )
        done.created.append(name)
    bounds = {p.name: p for p in existing}
    for name in decided.drop:
        if holds_deliveries:
            partition = bounds[name]
            low = "-infinity" if partition.lower is None else partition.lower.isoformat()
            high = "infinity" if partition.upper is None else partition.upper.isoformat()
            async with engine.begin() as moving:
                moved, left = await move_pending(moving, low, high, target)
            done.moved += moved
            if left:
                done.postponed.append(name)
                continue
        await connection.execute(text(f"ALTER TABLE {table} DETACH PARTITION {name} CONCURRENTLY"))
        await _drop_detached(engine, name, holds_deliveries, target)
        done.dropped.append(name)


async def _drop_detached(
    engine: AsyncEngine, name: str, holds_deliveries: bool, target: datetime
) -> None:
    """Drop a table detached from the log; pending deliveries it still holds (made pending
    after they were moved) are written back first, in the same transaction."""
    async with engine.begin() as connection:
        if holds_deliveries:
            restored = await restore_pending(connection, name, target)
            if restored:
                logger.info("pending deliveries written back before a drop", rows=restored)
        await connection.execute(text(f"DROP TABLE {name}"))


def delivery_log_loop(
    settings: Settings, clock: Callable[[], datetime] = lambda: datetime.now(UTC)
) -> WorkerLoop:
    """The maintenance as a worker loop: a round at start (partitions for the first writes),
    then every `interval_of` the layout; each round's failure logged and tried at the next."""
    layout = settings.delivery_log_layout
    every = interval_of(layout)

    async def run(runtime: ServiceRuntime, stop: asyncio.Event) -> None:
        runtime.progress.beat(LOOP, every)
        while not stop.is_set():
            try:
                done = await maintain(runtime.engine, layout, clock())
                if done.created or done.dropped or done.moved or done.postponed:
                    logger.info(
                        "delivery log partitions maintained",
                        loop=LOOP,
                        created=done.created,
                        dropped=done.dropped,
                        moved_pending=done.moved,
                        postponed=done.postponed,
                    )
                runtime.progress.beat(LOOP, every)
            except Exception as exc:
                logger.warning("delivery log maintenance failed", loop=LOOP, error=repr(exc))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), every)

    return run


async def prune_rollup(
    engine: AsyncEngine, cutoff: datetime, *, batch: int = 5000, progress: Progress = lambda: None
) -> int:
    """Delete the hourly rollup's hours before `cutoff`, `batch` at a time."""
    return await delete_in_batches(
        engine, _PRUNE_ROLLUP, {"cutoff": cutoff}, batch=batch, progress=progress
    )


def rollup_retention_loop(settings: Settings) -> WorkerLoop:
    """The portal charts' hours kept `DELIVERY_ROLLUP_RETENTION_DAYS`, longer than the raw
    log they were computed from."""
    retention = timedelta(days=settings.delivery_rollup_retention_days)
    batch = settings.retention_batch_size

    async def prune(engine: AsyncEngine, now: datetime, progress: Progress) -> int:
        return await prune_rollup(engine, now - retention, batch=batch, progress=progress)

    return pruning_loop(ROLLUP_LOOP, prune, settings.retention_prune_seconds)
