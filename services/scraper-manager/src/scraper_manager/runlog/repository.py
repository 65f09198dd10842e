"""Queries on run logs: the batched insert of the crawler, keyset reads, retention."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Sequence
from datetime import datetime

import sqlalchemy as sa
import structlog
from servicekit.db.like import like_escaped
from servicekit.loops import describe, is_outage
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlmodel import col, delete, select
from sqlmodel.ext.asyncio.session import AsyncSession

from scraper_manager.crawler.runlog import LogLine
from scraper_manager.crawler.text import clean_text, clean_value
from scraper_manager.models import LogLevel, RunLogLine

# One statement per batch, whatever its size: arrays unnested server-side.
_INSERT = text(
    """
    INSERT INTO run_log_lines (run_id, level, at, message, fields)
    SELECT :run_id, l.level, l.at, l.message, l.fields
    FROM unnest(CAST(:levels AS text[]), CAST(:ats AS timestamptz[]), CAST(:messages AS text[]),
                CAST(:fields AS jsonb[])) AS l(level, at, message, fields)
    """
)
logger = structlog.get_logger(__name__)
SEVERITY = {LogLevel.INFO: 0, LogLevel.WARNING: 1, LogLevel.ERROR: 2}


def levels_from(level: LogLevel | None) -> list[LogLevel] | None:
    """`level` as a minimum: warning means warnings and errors."""
    if level is None:
        return None
    return [lv for lv in LogLevel if SEVERITY[lv] >= SEVERITY[level]]


LOOP = "run-log writer"


async def insert_lines(connection: AsyncConnection, run_id: int, lines: Sequence[LogLine]) -> None:
    """Store a batch of a run's lines in the caller's transaction, each on its own: a line
    that cannot be stored (its fields cannot be written as JSON, PostgreSQL refuses them) is
    replaced by an error line saying so, with an error log naming the run, and the rest are
    stored. Only a lost connection (an outage) raises."""
    if not lines:
        return
    rows: list[tuple[str, datetime, str, str]] = []
    for line in lines:
        try:
            rows.append(_row_of(line))
        except Exception as exc:
            rows.append(_unstored(run_id, line, exc))
    try:
        async with connection.begin_nested():
            await _insert(connection, run_id, rows)
        return
    except Exception as exc:
        if is_outage(exc):
            raise
    # Some line is refused: each alone, so that one does not cost the others.
    for line, row in zip(lines, rows, strict=True):
        try:
            async with connection.begin_nested():
                await _insert(connection, run_id, [row])
            continue
        except Exception as exc:
            if is_outage(exc):
                raise
            stand_in = None if _is_unstored(row) else _unstored(run_id, line, exc)
        if stand_in is not None:
            with contextlib.suppress(Exception):  # logged already; the others go on
                async with connection.begin_nested():
                    await _insert(connection, run_id, [stand_in])


def _row_of(line: LogLine) -> tuple[str, datetime, str, str]:
    # Crawled text may hold NULs or lone surrogates, which Postgres refuses.
    return (
        line.level.value,
        line.at,
        clean_text(line.message),
        json.dumps(clean_value(line.fields), default=str),
    )


_UNSTORED = "a log line could not be stored"


def _unstored(run_id: int, line: LogLine, exc: BaseException) -> tuple[str, datetime, str, str]:
    """What stands in the log for a line that could not be stored."""
    error = describe(exc, 300)
    logger.error(
        "run log line not stored; an error line stands in for it",
        loop=LOOP,
        run_id=run_id,
        line=clean_text(line.message)[:200],
        error=error,
    )
    fields = {"message": clean_text(line.message)[:200], "error": clean_text(error)}
    return (LogLevel.ERROR.value, line.at, _UNSTORED, json.dumps(fields))


def _is_unstored(row: tuple[str, datetime, str, str]) -> bool:
    return row[2] == _UNSTORED


async def _insert(
    connection: AsyncConnection, run_id: int, rows: Sequence[tuple[str, datetime, str, str]]
) -> None:
    await connection.execute(
        _INSERT,
        {
            "run_id": run_id,
            "levels": [row[0] for row in rows],
            "ats": [row[1] for row in rows],
            "messages": [row[2] for row in rows],
            "fields": [row[3] for row in rows],
        },
    )


class RunLogRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def page(
        self,
        run_id: int,
        *,
        after: int | None,
        limit: int,
        level: LogLevel | None,
        contains: str | None = None,
    ) -> Sequence[RunLogLine]:
        """`contains`: a part of the message or of a field's value (the fields' JSON text),
        any case."""
        statement = select(RunLogLine).where(RunLogLine.run_id == run_id)
        if contains:
            pattern = "%" + like_escaped(contains) + "%"
            statement = statement.where(
                col(RunLogLine.message).ilike(pattern, escape="\\")
                | sa.cast(col(RunLogLine.fields), sa.Text).ilike(pattern, escape="\\")
            )
        if after is not None:
            statement = statement.where(col(RunLogLine.id) > after)
        wanted = levels_from(level)
        if wanted is not None and len(wanted) < len(LogLevel):
            statement = statement.where(col(RunLogLine.level).in_(wanted))
        return (await self.session.exec(statement.order_by(col(RunLogLine.id)).limit(limit))).all()

    async def stream(
        self, run_id: int, level: LogLevel | None, batch: int = 1000
    ) -> AsyncIterator[RunLogLine]:
        after: int | None = None
        while True:
            rows = await self.page(run_id, after=after, limit=batch, level=level)
            for row in rows:
                yield row
            if len(rows) < batch:
                return
            after = rows[-1].id

    async def prune(self, before: datetime, limit: int) -> int:
        """Up to `limit` lines written before `before`, oldest first (`ix_run_log_lines_at`):
        one short statement of a batched deletion, never the whole backlog at once."""
        chosen = (
            select(RunLogLine.id)
            .where(col(RunLogLine.at) < before)
            .order_by(col(RunLogLine.at))
            .limit(limit)
        )
        statement = delete(RunLogLine).where(col(RunLogLine.id).in_(chosen.scalar_subquery()))
        result = await self.session.exec(statement)
        return int(result.rowcount or 0)
