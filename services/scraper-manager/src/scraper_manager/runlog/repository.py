"""Queries on run logs: the batched insert of the crawler, keyset reads, retention."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from datetime import datetime

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
SEVERITY = {LogLevel.INFO: 0, LogLevel.WARNING: 1, LogLevel.ERROR: 2}


def levels_from(level: LogLevel | None) -> list[LogLevel] | None:
    """`level` as a minimum: warning means warnings and errors."""
    if level is None:
        return None
    return [lv for lv in LogLevel if SEVERITY[lv] >= SEVERITY[level]]


async def insert_lines(connection: AsyncConnection, run_id: int, lines: Sequence[LogLine]) -> None:
    if not lines:
        return
    await connection.execute(
        _INSERT,
        {
            "run_id": run_id,
            "levels": [line.level.value for line in lines],
            "ats": [line.at for line in lines],
            # Crawled text may hold NULs or lone surrogates, which Postgres refuses.
            "messages": [clean_text(line.message) for line in lines],
            "fields": [json.dumps(clean_value(line.fields), default=str) for line in lines],
        },
    )


class RunLogRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def page(
        self, run_id: int, *, after: int | None, limit: int, level: LogLevel | None
    ) -> Sequence[RunLogLine]:
        statement = select(RunLogLine).where(RunLogLine.run_id == run_id)
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

    async def prune(self, before: datetime) -> int:
        result = await self.session.exec(delete(RunLogLine).where(col(RunLogLine.at) < before))
        return int(result.rowcount or 0)
