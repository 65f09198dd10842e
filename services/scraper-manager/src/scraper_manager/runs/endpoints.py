"""Run history, run details, and results (JSON pages, or JSONL and CSV streamed for export):
thin HTTP over RunService."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query
from fastapi.responses import StreamingResponse
from servicekit.auth.dependencies import ReadPrincipal
from servicekit.web.params import DbId, OptionalDbIdQuery

from scraper_manager.errors import (
    AUTH,
    InvalidCursor,
    RequestInvalid,
    RunNotFound,
    ScraperNotFound,
    declared,
)
from scraper_manager.events import ChangeCounts
from scraper_manager.models import ChangeKind, RunStatus
from scraper_manager.runs.dependencies import RunServiceDep
from scraper_manager.runs.schemas import (
    ChangeList,
    ChangeOut,
    ItemList,
    ItemOut,
    RunList,
    RunOut,
)
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
    "/runs/{run_id}/changes",
    response_model=ChangeList,
    summary="What the run changed",
    description=(
        "The run's items against the previous successful run's, by the scraper's `item_key`: "
        "`added`, `removed` and `changed` (with `fields`, `{old, new}` of exactly the fields "
        "that differ), in key order; `kind` keeps one. `format=json` pages them (`limit`, "
        "`next_cursor` as `cursor`); `jsonl`, `csv` and `xlsx` download them all (CSV and XLSX: "
        "`change_kind`, `change_key`, `change_fields`, then the item's fields). A run that was "
        "not compared (no item_key, the first run, not completed) has `changes` null and none."
    ),
    responses={
        **declared(*AUTH, ScraperNotFound, RunNotFound, InvalidCursor, RequestInvalid),
        200: {
            "content": {
                "application/x-ndjson": {
                    "example": '{"kind": "added", "key": "sku-9", "item": {"sku": "sku-9"}}\n'
                },
                "text/csv": {
                    "example": "change_kind,change_key,change_fields,url,sku\r\n"
                    "added,sku-9,,https://example.com/p/9,sku-9\r\n"
                },
                XLSX_MEDIA_TYPE: {
                    "schema": {"type": "string", "format": "binary"},
                    "example": "(a workbook: sheet `changes`, row 1 = change_kind, change_key, ...)",
                },
            }
        },
    },
)
async def changes(
    scraper_id: DbId,
    run_id: DbId,
    principal: ReadPrincipal,
    service: RunServiceDep,
    kind: ChangeKind | None = None,
    format: Literal["json", "jsonl", "csv", "xlsx"] = "json",
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    cursor: Annotated[str | None, Query(max_length=20)] = None,
) -> ChangeList | StreamingResponse:
    run = await service.get(principal.owner, scraper_id, run_id)
    if format != "json":
        export = await service.export_changes(principal.owner, scraper_id, run, kind, format)
        return StreamingResponse(
            export.body,
            media_type=export.media_type,
            headers={"Content-Disposition": f'attachment; filename="{export.filename}"'},
        )
    scraper = await service.scraper(principal.owner, scraper_id)
    page = await service.changes(run, kind=kind, limit=limit, cursor=cursor)
    return ChangeList(
        run_id=run.id,
        item_key=scraper.item_key,
        changes=None if run.changes is None else ChangeCounts.model_validate(run.changes),
        data=[ChangeOut.of(change) for change in page.items],
        next_cursor=page.next_cursor,
    )


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
