"""A run's log: pages of lines (keyset, oldest first) or the whole log as plain text."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import StreamingResponse
from servicekit.auth.dependencies import ReadPrincipal
from servicekit.web.params import DbId

from scraper_manager.errors import (
    AUTH,
    InvalidCursor,
    RequestInvalid,
    RunNotFound,
    ScraperNotFound,
    declared,
)
from scraper_manager.models import LogLevel
from scraper_manager.runlog.dependencies import RunLogServiceDep
from scraper_manager.runlog.schemas import LogLineList, LogLineOut

router = APIRouter(prefix="/scrapers/{scraper_id}/runs/{run_id}", tags=["runs"])
LevelQuery = Annotated[
    LogLevel | None,
    Query(description="The least severe level shown: `warning` shows warnings and errors."),
]


@router.get(
    "/log",
    response_model=LogLineList,
    summary="Run log",
    description=(
        "What the crawl wrote about itself, oldest first: run start with its settings, "
        "robots.txt, failed and retried requests, robots refusals, proxies benched, rate-limit "
        "waits, stop, run end with totals. `limit` per page; `next_cursor` as `after` for the "
        "next page (also to tail a running crawl: lines written later come after it). At most "
        "the operator's cap of lines per run, then one line saying how many were dropped."
    ),
    responses=declared(*AUTH, ScraperNotFound, RunNotFound, InvalidCursor, RequestInvalid),
)
async def run_log(
    scraper_id: DbId,
    run_id: DbId,
    principal: ReadPrincipal,
    service: RunLogServiceDep,
    level: LevelQuery = None,
    after: Annotated[str | None, Query(max_length=20)] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> LogLineList:
    page = await service.page(
        principal.owner, scraper_id, run_id, after=after, limit=limit, level=level
    )
    return LogLineList(
        data=[LogLineOut.of(line) for line in page.items], next_cursor=page.next_cursor
    )


@router.get(
    "/log.txt",
    summary="Run log as text",
    description="The whole log streamed as plain text, one line each: time, level, message, "
    "then `key=value` fields with JSON values.",
    response_class=StreamingResponse,
    responses={
        **declared(*AUTH, ScraperNotFound, RunNotFound, RequestInvalid),
        200: {
            "content": {
                "text/plain": {
                    "example": "2026-11-22T10:00:01.000Z INFO    run started "
                    'url="https://shop.example/"\n'
                }
            }
        },
    },
)
async def run_log_text(
    scraper_id: DbId,
    run_id: DbId,
    principal: ReadPrincipal,
    service: RunLogServiceDep,
    level: LevelQuery = None,
) -> StreamingResponse:
    run, body = await service.text(principal.owner, scraper_id, run_id, level)
    return StreamingResponse(
        body,
        media_type="text/plain; charset=utf-8",
        headers={"Content-Disposition": f'inline; filename="run-{run.id}.log"'},
    )
