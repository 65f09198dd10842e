"""Run history, run details, and results (JSON pages, or JSONL and CSV streamed for export)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import StreamingResponse
from servicekit.auth.dependencies import ReadPrincipal
from servicekit.errors import NotFound
from servicekit.paging import decode_id_cursor
from servicekit.web.params import DbId, OptionalDbIdQuery

from scraper_manager.dependencies import ScraperServiceDep
from scraper_manager.errors import AUTH_ERRORS, BAD_CURSOR, NOT_FOUND
from scraper_manager.models import Scraper
from scraper_manager.runs.export import csv_cell
from scraper_manager.runs.repository import RunRepository
from scraper_manager.runs.schemas import ItemList, ItemOut, RunList, RunOut, RunStatus

router = APIRouter(prefix="/scrapers/{scraper_id}", tags=["runs"])
DEFAULT_FIELDS = ("url", "status", "title", "description")


@router.get("/runs", response_model=RunList, responses={**AUTH_ERRORS, **NOT_FOUND, **BAD_CURSOR})
async def list_runs(
    scraper_id: DbId,
    principal: ReadPrincipal,
    service: ScraperServiceDep,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    cursor: Annotated[str | None, Query(max_length=20)] = None,
    status: RunStatus | None = None,
) -> RunList:
    await service.get(principal.owner, scraper_id)
    rows = list(
        await RunRepository(service.session).page(
            scraper_id, limit=limit + 1, before_id=decode_id_cursor(cursor), status=status
        )
    )
    next_cursor = str(rows[limit - 1].id) if len(rows) > limit else None
    return RunList(data=[RunOut.of(r) for r in rows[:limit]], next_cursor=next_cursor)


@router.get("/runs/{run_id}", response_model=RunOut, responses={**AUTH_ERRORS, **NOT_FOUND})
async def get_run(
    scraper_id: DbId, run_id: DbId, principal: ReadPrincipal, service: ScraperServiceDep
) -> RunOut:
    await service.get(principal.owner, scraper_id)
    run = await RunRepository(service.session).get(scraper_id, run_id)
    if run is None:
        raise NotFound(f"Run {run_id} not found")
    return RunOut.of(run)


def _columns(scraper: Scraper) -> list[str]:
    return (
        ["url", *[k for k in scraper.selectors if k != "url"]]
        if scraper.selectors
        else list(DEFAULT_FIELDS)
    )


@router.get(
    "/results",
    response_model=ItemList,
    responses={
        **AUTH_ERRORS,
        **NOT_FOUND,
        **BAD_CURSOR,
        200: {"content": {"application/x-ndjson": {}, "text/csv": {}}},
    },
)
async def results(
    request: Request,
    scraper_id: DbId,
    principal: ReadPrincipal,
    service: ScraperServiceDep,
    run_id: OptionalDbIdQuery = None,
    format: Literal["json", "jsonl", "csv"] = "json",
    order: Literal["asc", "desc"] = "asc",
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    cursor: Annotated[str | None, Query(max_length=20)] = None,
) -> ItemList | StreamingResponse:
    """The items of `run_id`, or of the latest run. JSON pages by cursor; `jsonl` and `csv`
    stream every item, for export."""
    scraper = await service.get(principal.owner, scraper_id)
    runs = RunRepository(service.session)
    run = (
        await runs.get(scraper_id, run_id)
        if run_id is not None
        else await runs.latest_with_items(scraper_id)
    )
    if run_id is not None and run is None:
        raise NotFound(f"Run {run_id} not found")
    if run is None or run.id is None:
        return ItemList(run_id=None, data=[], next_cursor=None)
    if format == "json":
        rows = list(
            await runs.items(
                run.id,
                cursor=decode_id_cursor(cursor),
                limit=limit + 1,
                newest_first=order == "desc",
            )
        )
        next_cursor = str(rows[limit - 1].id) if len(rows) > limit else None
        return ItemList(
            run_id=run.id, data=[ItemOut.of(r) for r in rows[:limit]], next_cursor=next_cursor
        )
    run_key = run.id
    name = f"scraper-{scraper_id}-run-{run_key}"
    # The request's session closes when this function returns, before the body streams: the
    # stream reads through a session of its own, closed when the stream ends.
    session_factory = request.app.state.session_factory

    async def stream_items() -> AsyncIterator[Any]:
        async with session_factory() as stream_session:
            async for item in RunRepository(stream_session).stream_items(run_key):
                yield item

    async def jsonl() -> AsyncIterator[bytes]:
        async for item in stream_items():
            line = {"url": item.url, **item.data}
            yield (json.dumps(line, ensure_ascii=False, default=str) + "\n").encode()

    async def csv_rows() -> AsyncIterator[bytes]:
        columns = _columns(scraper)
        buffer = io.StringIO()
        writer = csv.writer(buffer)
        writer.writerow(columns)
        async for item in stream_items():
            record = {"url": item.url, **item.data}
            writer.writerow([csv_cell(record.get(c)) for c in columns])
            if buffer.tell() > 64_000:
                yield buffer.getvalue().encode()
                buffer.seek(0)
                buffer.truncate()
        yield buffer.getvalue().encode()

    if format == "jsonl":
        return StreamingResponse(
            jsonl(),
            media_type="application/x-ndjson",
            headers={"Content-Disposition": f'attachment; filename="{name}.jsonl"'},
        )
    return StreamingResponse(
        csv_rows(),
        media_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="{name}.csv"'},
    )
