"""Run history, run details, and results (JSON pages, or JSONL and CSV streamed for export):
thin HTTP over RunService."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query
from fastapi.responses import StreamingResponse
from servicekit.auth.dependencies import ReadPrincipal
from servicekit.web.params import DbId, OptionalDbIdQuery

from scraper_manager.dependencies import RunServiceDep
from scraper_manager.errors import (
    AUTH,
    InvalidCursor,
    RequestInvalid,
    RunNotFound,
    ScraperNotFound,
    declared,
)
from scraper_manager.models import RunStatus
from scraper_manager.runs.schemas import ItemList, ItemOut, RunList, RunOut
from scraper_manager.runs.service import XLSX_MEDIA_TYPE

router = APIRouter(prefix="/scrapers/{scraper_id}", tags=["runs"])


@router.get(
    "/runs",
    response_model=RunList,
    summary="Run history",
    description=(
        "The scraper's runs, newest first, `limit` per page (`next_cursor` as `cursor` for "
        "the next); `status` keeps the runs in that status."
    ),
    responses=declared(*AUTH, ScraperNotFound, InvalidCursor, RequestInvalid),
)
async def list_runs(
    scraper_id: DbId,
    principal: ReadPrincipal,
    service: RunServiceDep,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    cursor: Annotated[str | None, Query(max_length=20)] = None,
    status: RunStatus | None = None,
) -> RunList:
    page = await service.page(
        principal.owner, scraper_id, limit=limit, cursor=cursor, status=status
    )
    return RunList(data=[RunOut.of(run) for run in page.items], next_cursor=page.next_cursor)


@router.get(
    "/runs/{run_id}",
    response_model=RunOut,
    summary="Run details",
    description="One run: status, trigger, times, items collected, last error and statistics.",
    responses=declared(*AUTH, ScraperNotFound, RunNotFound, RequestInvalid),
)
async def get_run(
    scraper_id: DbId, run_id: DbId, principal: ReadPrincipal, service: RunServiceDep
) -> RunOut:
    return RunOut.of(await service.get(principal.owner, scraper_id, run_id))


@router.get(
    "/results",
    response_model=ItemList,
    summary="Collected results",
    description=(
        "The items of `run_id`, or of the latest run. `format=json` (default) pages them in "
        "crawl order (`order=desc`: newest first), `limit` per page, `next_cursor` as "
        "`cursor` for the next; items a running crawl adds come on later pages. `jsonl` and "
        "`csv` stream every item as a download (CSV cells that look like formulas are "
        "prefixed with `'`); `xlsx` too, one sheet with `url` then the union of the items' "
        "keys in first-seen order, nested values as JSON text, text never a formula."
    ),
    responses={
        **declared(*AUTH, ScraperNotFound, RunNotFound, InvalidCursor, RequestInvalid),
        200: {
            "content": {
                "application/x-ndjson": {
                    "example": '{"url": "https://example.com/p/1", "name": "Mug"}\n'
                },
                "text/csv": {"example": "url,name\r\nhttps://example.com/p/1,Mug\r\n"},
                XLSX_MEDIA_TYPE: {
                    "schema": {"type": "string", "format": "binary"},
                    "example": "(a workbook: sheet `results`, row 1 = url, name, ...)",
                },
            }
        },
    },
)
async def results(
    scraper_id: DbId,
    principal: ReadPrincipal,
    service: RunServiceDep,
    run_id: OptionalDbIdQuery = None,
    format: Literal["json", "jsonl", "csv", "xlsx"] = "json",
    order: Literal["asc", "desc"] = "asc",
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    cursor: Annotated[str | None, Query(max_length=20)] = None,
) -> ItemList | StreamingResponse:
    run = await service.results_run(principal.owner, scraper_id, run_id)
    if run is None:
        return ItemList(run_id=None, data=[], next_cursor=None)
    if format == "json":
        page = await service.items(run, limit=limit, cursor=cursor, newest_first=order == "desc")
        return ItemList(
            run_id=run.id, data=[ItemOut.of(i) for i in page.items], next_cursor=page.next_cursor
        )
    export = await service.export(principal.owner, scraper_id, run, format)
    return StreamingResponse(
        export.body,
        media_type=export.media_type,
        headers={"Content-Disposition": f'attachment; filename="{export.filename}"'},
    )
