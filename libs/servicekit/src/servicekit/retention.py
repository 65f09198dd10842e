"""Retention: the worker deletes rows that have outlived their use, each table on its own
setting, in short batches.

Every deletion is set-based and bounded: `DELETE ... WHERE id IN (SELECT id ... LIMIT n)`, one
batch per transaction, until a batch comes back short. A long backlog (a first run on a
database that kept everything) then holds no lock for long, leaves autovacuum room between
batches, and never grows one transaction's WAL without end. The subquery skips rows another
transaction holds (`FOR UPDATE SKIP LOCKED`), so two workers pruning the same table, or the
relay holding a batch, never wait on each other.

What is pruned here, with the cutoff that decides it (`now` is the caller's clock, so tests
move it):

- `outbox_events`: rows published more than `OUTBOX_RETENTION_HOURS` ago. A row set aside
  (`failed_at`, never published) is kept whatever its age, until an operator deals with it:
  it is the only copy of an event that never reached the stream.
- `mail_outbox`: messages sent, or dead-lettered, more than `MAIL_RETENTION_DAYS` ago.
  Unsent mail is never pruned (the mail loop retries it, then dead-letters it).
- one-time sign-in links (any table of `servicekit.web.pages.links`' shape): links whose
  expiry is more than `LINK_RETENTION_HOURS` past. A link is spent only before its expiry,
  so this covers used links too; until then an old link still answers "used" or "expired"
  rather than "unknown".

Each pruning runs as a worker loop of its own (`pruning_loop`): it reports progress for
`/readyz` after each batch and each round, and a failure is logged and tried again at the
next round without touching the other loops.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import structlog
from sqlalchemy import DateTime, Executable, Integer, Table, bindparam, delete, select, text
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlmodel import SQLModel

from servicekit.settings import ServiceSettings

if TYPE_CHECKING:
    from servicekit.runtime import ServiceRuntime, WorkerLoop

logger = structlog.get_logger(__name__)

# Rows per statement: large enough that a backlog of millions takes minutes, small enough
# that each transaction is a few milliseconds to a second.
BATCH = 5000

OUTBOX_LOOP = "outbox-retention"
MAIL_LOOP = "mail-retention"
LINK_LOOP = "link-retention"

# By `ix_outbox_events_published_at`; unpublished rows (pending or set aside) have no
# `published_at` and never match.
_PRUNE_OUTBOX = text(
    """
    DELETE FROM outbox_events WHERE id IN (
        SELECT id FROM outbox_events
        WHERE published_at < :cutoff
        ORDER BY published_at
        LIMIT :batch
        FOR UPDATE SKIP LOCKED
    )
    """
)
# By `ix_mail_outbox_finished` (on coalesce(sent_at, dead_at), partial on the same predicate):
# a message is either sent or dead, never both.
_PRUNE_MAIL = text(
    """
    DELETE FROM mail_outbox WHERE id IN (
        SELECT id FROM mail_outbox
        WHERE (sent_at IS NOT NULL OR dead_at IS NOT NULL)
          AND coalesce(sent_at, dead_at) < :cutoff
        ORDER BY coalesce(sent_at, dead_at)
        LIMIT :batch
        FOR UPDATE SKIP LOCKED
    )
    """
)

Progress = Callable[[], None]
Prune = Callable[[AsyncEngine, datetime, Progress], Awaitable[int]]


def _nothing() -> None:
    return None


async def delete_in_batches(
    engine: AsyncEngine,
    statement: Executable,
    parameters: Mapping[str, Any],
    *,
    batch: int = BATCH,
    progress: Progress = _nothing,
) -> int:
    """Run `statement` (a DELETE of at most `:batch` rows) in a transaction of its own until
    it deletes fewer than `batch` rows; how many it deleted. `progress` after each batch."""
    total = 0
    while True:
        async with engine.begin() as connection:
            result = await connection.execute(statement, {**parameters, "batch": batch})
        deleted = int(getattr(result, "rowcount", 0) or 0)
        total += deleted
        progress()
        if deleted < batch:
            return total


async def prune_outbox(
    engine: AsyncEngine,
    now: datetime,
    retention: timedelta,
    *,
    batch: int = BATCH,
    progress: Progress = _nothing,
) -> int:
    """Delete outbox rows published before `now - retention`; rows set aside stay."""
    return await delete_in_batches(
        engine, _PRUNE_OUTBOX, {"cutoff": now - retention}, batch=batch, progress=progress
    )


async def prune_mail(
    engine: AsyncEngine,
    now: datetime,
    retention: timedelta,
    *,
    batch: int = BATCH,
    progress: Progress = _nothing,
) -> int:
    """Delete mail sent or dead-lettered before `now - retention`; unsent mail stays."""
    return await delete_in_batches(
        engine, _PRUNE_MAIL, {"cutoff": now - retention}, batch=batch, progress=progress
    )


def _links_statement(table: type[SQLModel]) -> Executable:
    columns: Table = table.__table__  # type: ignore[attr-defined]
    missing = [name for name in ("token_hash", "expires_at") if name not in columns.c]
    if missing:
        raise TypeError(f"{table.__name__} has no column {', '.join(missing)}")
    c = columns.c
    chosen = (
        select(c.token_hash)
        .where(c.expires_at < bindparam("cutoff", type_=DateTime(timezone=True)))
        .order_by(c.expires_at)
        .limit(bindparam("batch", type_=Integer))
        .with_for_update(skip_locked=True)
    )
    return delete(columns).where(c.token_hash.in_(chosen.scalar_subquery()))


async def prune_links(
    engine: AsyncEngine,
    table: type[SQLModel],
    now: datetime,
    retention: timedelta,
    *,
    batch: int = BATCH,
    progress: Progress = _nothing,
) -> int:
    """Delete the sign-in links of `table` that expired before `now - retention` (used or
    not: a link is used only before it expires)."""
    return await delete_in_batches(
        engine,
        _links_statement(table),
        {"cutoff": now - retention},
        batch=batch,
        progress=progress,
    )


def pruning_loop(
    name: str,
    prune: Prune,
    every_seconds: float,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> WorkerLoop:
    """A worker loop running `prune(engine, now, progress)` every `every_seconds`, named
    `name` in logs and in `/readyz`. A round that fails is logged and tried at the next one;
    the loop beats after each batch and each completed round."""

    async def run(runtime: ServiceRuntime, stop: asyncio.Event) -> None:
        runtime.progress.beat(name, every_seconds)
        while not stop.is_set():
            try:
                deleted = await prune(
                    runtime.engine, clock(), lambda: runtime.progress.beat(name, every_seconds)
                )
                if deleted:
                    logger.info("rows past their retention deleted", loop=name, rows=deleted)
                runtime.progress.beat(name, every_seconds)
            except Exception as exc:
                logger.warning("retention round failed", loop=name, error=repr(exc))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), every_seconds)

    run.__qualname__ = f"pruning_loop[{name}]"
    return run


def outbox_retention_loop(settings: ServiceSettings) -> WorkerLoop:
    retention = timedelta(hours=settings.outbox_retention_hours)
    batch = settings.retention_batch_size

    async def prune(engine: AsyncEngine, now: datetime, progress: Progress) -> int:
        return await prune_outbox(engine, now, retention, batch=batch, progress=progress)

    return pruning_loop(OUTBOX_LOOP, prune, settings.retention_prune_seconds)


def mail_retention_loop(settings: ServiceSettings) -> WorkerLoop:
    retention = timedelta(days=settings.mail_retention_days)
    batch = settings.retention_batch_size

    async def prune(engine: AsyncEngine, now: datetime, progress: Progress) -> int:
        return await prune_mail(engine, now, retention, batch=batch, progress=progress)

    return pruning_loop(MAIL_LOOP, prune, settings.retention_prune_seconds)


def link_retention_loop(
    table: type[SQLModel], settings: ServiceSettings, retention_hours: float
) -> WorkerLoop:
    """Pruning of one service's sign-in link table, `retention_hours` past each expiry."""
    _links_statement(table)  # a table without the columns fails at start, not every round
    retention = timedelta(hours=retention_hours)
    batch = settings.retention_batch_size

    async def prune(engine: AsyncEngine, now: datetime, progress: Progress) -> int:
        return await prune_links(engine, table, now, retention, batch=batch, progress=progress)

    return pruning_loop(LINK_LOOP, prune, settings.retention_prune_seconds)
