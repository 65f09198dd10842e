"""A run's log for its owner: pages of lines, or the whole log as text."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime

from servicekit.paging import Page, decode_id_cursor, page_of
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession

from scraper_manager.crawler.runlog import retention_cutoff
from scraper_manager.models import LogLevel, Run, RunLogLine
from scraper_manager.runlog.repository import RunLogRepository
from scraper_manager.runs.service import RunService

# Log lines deleted per transaction by retention.
PRUNE_BATCH = 5000


def text_line(line: RunLogLine) -> str:
    """`<time> <LEVEL> <message> key=value ...`, values as JSON (so spaces stay unambiguous)."""
    at = line.at.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    fields = " ".join(
        f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in line.fields.items() if v is not None
    )
    head = f"{at} {line.level.upper():<7} {line.message}"
    return f"{head} {fields}\n" if fields else f"{head}\n"


class RunLogService:
    def __init__(
        self, session: AsyncSession, session_factory: async_sessionmaker[AsyncSession]
    ) -> None:
        self.session_factory = session_factory
        self.runs = RunService(session, session_factory)
        self.lines = RunLogRepository(session)

    async def page(
        self,
        owner: str,
        scraper_id: int,
        run_id: int,
        *,
        after: str | None,
        limit: int,
        level: LogLevel | None,
    ) -> Page[RunLogLine]:
        run = await self.runs.get(owner, scraper_id, run_id)
        rows = await self.lines.page(
            run.id, after=decode_id_cursor(after), limit=limit + 1, level=level
        )
        return page_of(rows, limit, lambda line: str(line.id))

    async def text(
        self, owner: str, scraper_id: int, run_id: int, level: LogLevel | None
    ) -> tuple[Run, AsyncIterator[bytes]]:
        run = await self.runs.get(owner, scraper_id, run_id)
        return run, self._text(run.id, level)

    async def _text(self, run_id: int, level: LogLevel | None) -> AsyncIterator[bytes]:
        # The request's session closes before the body streams: a session of its own.
        async with self.session_factory() as session:
            chunk: list[str] = []
            async for line in RunLogRepository(session).stream(run_id, level):
                chunk.append(text_line(line))
                if len(chunk) >= 500:
                    yield "".join(chunk).encode()
                    chunk = []
            yield "".join(chunk).encode()


async def prune_run_logs(
    session_factory: async_sessionmaker[AsyncSession],
    *,
    now: datetime,
    retention_days: int,
    batch: int = PRUNE_BATCH,
) -> int:
    """Delete the log lines older than the retention, `batch` lines per transaction; how many.
    `now` is the caller's clock."""
    before = retention_cutoff(now, retention_days)
    total = 0
    while True:
        async with session_factory() as session, session.begin():
            deleted = await RunLogRepository(session).prune(before, batch)
        total += deleted
        if deleted < batch:
            return total
