"""Run history, run details and results of a client's scraper."""

from __future__ import annotations

import asyncio
import csv
import io
import json
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Literal

from servicekit.paging import Page, decode_id_cursor, page_of
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession

from scraper_manager.errors import ItemNotFound, RunNotFound, ScraperNotFound
from scraper_manager.models import ChangeKind, Item, Run, RunChange, RunStatus, Scraper
from scraper_manager.runs.changes import ChangeRepository
from scraper_manager.runs.export import XlsxRows, csv_cell
from scraper_manager.runs.repository import RunRepository
from scraper_manager.scrapers.repository import ScraperRepository
from scraper_manager.scrapers.schemas import item_fields

DEFAULT_FIELDS = ("url", "status", "title", "description")
ExportFormat = Literal["json", "jsonl", "csv", "xlsx"]
XLSX_MEDIA_TYPE = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
XLSX_BATCH = 1000
SEND_CHUNK = 64 * 1024


@dataclass(frozen=True)
class Export:
    filename: str
    media_type: str
    body: AsyncIterator[bytes]


def export_columns(scraper: Scraper) -> list[str]:
    """CSV columns: `url`, then the scraper's selector names (or the default item's fields)."""
    return item_fields(scraper.selectors)


class RunService:
    def __init__(
        self, session: AsyncSession, session_factory: async_sessionmaker[AsyncSession]
    ) -> None:
        self.session = session
        self.session_factory = session_factory
        self.runs = RunRepository(session)
        self.scrapers = ScraperRepository(session)

    async def scraper(self, owner: str, scraper_id: int) -> Scraper:
        return await self._scraper(owner, scraper_id)

    async def _scraper(self, owner: str, scraper_id: int) -> Scraper:
        scraper = await self.scrapers.get_owned(scraper_id, owner)
        if scraper is None:
            raise ScraperNotFound(f"Scraper {scraper_id} not found")
        return scraper

    async def page(
        self,
        owner: str,
        scraper_id: int,
        *,
        limit: int,
        cursor: str | None,
        status: RunStatus | None,
    ) -> Page[Run]:
        await self._scraper(owner, scraper_id)
        rows = await self.runs.page(
            scraper_id, limit=limit + 1, before_id=decode_id_cursor(cursor), status=status
        )
        return page_of(rows, limit, lambda run: str(run.id))

    async def get(self, owner: str, scraper_id: int, run_id: int) -> Run:
        await self._scraper(owner, scraper_id)
        run = await self.runs.get(scraper_id, run_id)
        if run is None:
            raise RunNotFound(f"Run {run_id} not found")
        return run

    async def results_run(self, owner: str, scraper_id: int, run_id: int | None) -> Run | None:
        """The named run, or the latest one (None when the scraper never ran)."""
        await self._scraper(owner, scraper_id)
        if run_id is None:
            return await self.runs.latest_with_items(scraper_id)
        return await self.get(owner, scraper_id, run_id)

    async def items(
        self,
        run: Run,
        *,
        limit: int,
        cursor: str | None,
        newest_first: bool,
        search: str | None = None,
    ) -> Page[Item]:
        rows = await self.runs.items(
            run.id,
            cursor=decode_id_cursor(cursor),
            limit=limit + 1,
            newest_first=newest_first,
            search=search,
        )
        return page_of(rows, limit, lambda item: str(item.id))

    async def item(self, run: Run, item_id: int) -> Item:
        """One item of the run (another run's id is 404 alike)."""
        found = await self.runs.item(run.id, item_id)
        if found is None:
            raise ItemNotFound(f"Item {item_id} not found")
        return found

    async def preview(self, run: Run, limit: int) -> tuple[list[Item], list[str]]:
        """A run's first `limit` items in crawl order, and the keys of all its items in
        first-seen order (the exports' columns)."""
        first = await self.runs.items(run.id, cursor=None, limit=limit)
        return list(first), await self.runs.item_keys(run.id)

    async def export(self, owner: str, scraper_id: int, run: Run, format: ExportFormat) -> Export:
        scraper = await self._scraper(owner, scraper_id)
        filename = f"scraper-{scraper_id}-run-{run.id}.{format}"
        if format == "json":
            return Export(filename, "application/json", self._json_array(run.id))
        if format == "jsonl":
            return Export(filename, "application/x-ndjson", self._jsonl(run.id))
        if format == "xlsx":
            return Export(filename, XLSX_MEDIA_TYPE, self._xlsx(run.id))
        return Export(
            filename, "text/csv; charset=utf-8", self._csv(run.id, export_columns(scraper))
        )

    async def changes(
        self, run: Run, *, kind: ChangeKind | None, limit: int, cursor: str | None
    ) -> Page[RunChange]:
        """The run's changes in key order (one kind or all), keyset-paged by id."""
        rows = await ChangeRepository(self.session).page(
            run.id, kind=kind, after=decode_id_cursor(cursor), limit=limit + 1
        )
        return page_of(rows, limit, lambda change: str(change.id))

    async def export_changes(
        self, owner: str, scraper_id: int, run: Run, kind: ChangeKind | None, format: ExportFormat
    ) -> Export:
        """The run's changes as a download, through the results' writers: JSON and JSONL hold
        the API's objects; CSV and XLSX one row per change, `change_kind`, `change_key`,
        `change_fields` (the differing fields as JSON), then the item's fields."""
        scraper = await self._scraper(owner, scraper_id)
        suffix = f"-{kind.value}" if kind is not None else ""
        filename = f"scraper-{scraper_id}-run-{run.id}-changes{suffix}.{format}"
        records = self._change_records(run.id, kind)
        columns = ["change_kind", "change_key", "change_fields", *item_fields(scraper.selectors)]
        if format == "json":
            return Export(filename, "application/json", _json_array(records))
        if format == "jsonl":
            return Export(filename, "application/x-ndjson", _jsonl(records))
        if format == "xlsx":
            return Export(filename, XLSX_MEDIA_TYPE, _xlsx(_rows(records), columns, "changes"))
        return Export(filename, "text/csv; charset=utf-8", _csv(_rows(records), columns))

    async def _change_records(
        self, run_id: int, kind: ChangeKind | None
    ) -> AsyncIterator[dict[str, Any]]:
        # The request's session closes before the body streams: a session of its own.
        async with self.session_factory() as session:
            changes = ChangeRepository(session)
            after: int | None = None
            while True:
                rows = await changes.page(run_id, kind=kind, after=after, limit=XLSX_BATCH)
                for row in rows:
                    record: dict[str, Any] = {"kind": row.kind, "key": row.key, "item": row.item}
                    if row.fields is not None:
                        record["fields"] = row.fields
                    yield record
                if len(rows) < XLSX_BATCH:
                    return
                after = rows[-1].id

    async def _stream(self, run_id: int) -> AsyncIterator[Item]:
        # The request's session closes before the body streams: a session of its own.
        async with self.session_factory() as session:
            async for item in RunRepository(session).stream_items(run_id):
                yield item

    async def _json_array(self, run_id: int) -> AsyncIterator[bytes]:
        """The items as one JSON array (as JSONL's lines), streamed."""
        yield b"["
        first = True
        async for item in self._stream(run_id):
            line = json.dumps({"url": item.url, **item.data}, ensure_ascii=False, default=str)
            yield (line if first else "," + line).encode()
            first = False
        yield b"]"

    async def _jsonl(self, run_id: int) -> AsyncIterator[bytes]:
        async for item in self._stream(run_id):
            line = {"url": item.url, **item.data}
            yield (json.dumps(line, ensure_ascii=False, default=str) + "\n").encode()

    async def _csv(self, run_id: int, columns: list[str]) -> AsyncIterator[bytes]:
        buffer = io.StringIO()
        writer = csv.writer(buffer)
        # Names are client text (selector names): neutralised as values are.
        writer.writerow([csv_cell(c) for c in columns])
        async for item in self._stream(run_id):
            record = {"url": item.url, **item.data}
            writer.writerow([csv_cell(record.get(c)) for c in columns])
            if buffer.tell() > 64_000:
                yield buffer.getvalue().encode()
                buffer.seek(0)
                buffer.truncate()
        yield buffer.getvalue().encode()

    async def _xlsx(self, run_id: int) -> AsyncIterator[bytes]:
        """Rows written as they are read, in a thread (openpyxl is synchronous CPU work), into a
        temporary file that is then sent in chunks: memory stays flat however many items."""
        async with self.session_factory() as session:
            keys = await RunRepository(session).item_keys(run_id)
        columns = ["url", *[k for k in keys if k != "url"]]
        rows = XlsxRows(columns)
        batch: list[dict[str, object]] = []
        async for item in self._stream(run_id):
            batch.append({"url": item.url, **item.data})
            if len(batch) >= XLSX_BATCH:
                await asyncio.to_thread(rows.append, batch)
                batch = []
        await asyncio.to_thread(rows.append, batch)
        with tempfile.TemporaryFile() as target:
            await asyncio.to_thread(rows.save, target)
            target.seek(0)
            while chunk := await asyncio.to_thread(target.read, SEND_CHUNK):
                yield chunk


async def _rows(records: AsyncIterator[dict[str, Any]]) -> AsyncIterator[dict[str, Any]]:
    """A change as one flat row of the spreadsheet exports."""
    async for record in records:
        yield {
            "change_kind": record["kind"],
            "change_key": record["key"],
            "change_fields": record.get("fields"),
            **record["item"],
        }


async def _json_array(records: AsyncIterator[dict[str, Any]]) -> AsyncIterator[bytes]:
    yield b"["
    first = True
    async for record in records:
        line = json.dumps(record, ensure_ascii=False, default=str)
        yield (line if first else "," + line).encode()
        first = False
    yield b"]"


async def _jsonl(records: AsyncIterator[dict[str, Any]]) -> AsyncIterator[bytes]:
    async for record in records:
        yield (json.dumps(record, ensure_ascii=False, default=str) + "\n").encode()


async def _csv(records: AsyncIterator[dict[str, Any]], columns: list[str]) -> AsyncIterator[bytes]:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow([csv_cell(c) for c in columns])
    async for record in records:
        writer.writerow([csv_cell(record.get(c)) for c in columns])
        if buffer.tell() > 64_000:
            yield buffer.getvalue().encode()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue().encode()


async def _xlsx(
    records: AsyncIterator[dict[str, Any]], columns: list[str], title: str
) -> AsyncIterator[bytes]:
    """As the results' XLSX: rows written in a thread into a temporary file, then sent."""
    rows = XlsxRows(columns, title)
    batch: list[dict[str, Any]] = []
    async for record in records:
        batch.append(record)
        if len(batch) >= XLSX_BATCH:
            await asyncio.to_thread(rows.append, batch)
            batch = []
    await asyncio.to_thread(rows.append, batch)
    with tempfile.TemporaryFile() as target:
        await asyncio.to_thread(rows.save, target)
        target.seek(0)
        while chunk := await asyncio.to_thread(target.read, SEND_CHUNK):
            yield chunk
