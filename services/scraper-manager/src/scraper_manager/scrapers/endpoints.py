"""`/api/v1/scrapers`: thin HTTP over ScraperService."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, BackgroundTasks, Query, Request, Response, status
from servicekit.auth.dependencies import AdminPrincipal, ReadPrincipal, WritePrincipal
from servicekit.paging import decode_id_cursor
from servicekit.web.params import DbId

from scraper_manager.crawler.queue import enqueue_run
from scraper_manager.crawler.signals import signal_stop
from scraper_manager.dependencies import ScraperServiceDep
from scraper_manager.errors import AUTH_ERRORS, BAD_CURSOR, CONFLICT, INVALID, NOT_FOUND
from scraper_manager.scrapers.schemas import (
    RunStarted,
    RunStopping,
    ScraperConfig,
    ScraperList,
    ScraperOut,
    ScraperPatch,
    ScraperStatus,
    StatusView,
)

router = APIRouter(prefix="/scrapers", tags=["scrapers"])


@router.post(
    "",
    response_model=ScraperOut,
    status_code=status.HTTP_201_CREATED,
    responses={**AUTH_ERRORS, **CONFLICT, **INVALID},
)
async def create_scraper(
    body: ScraperConfig, principal: WritePrincipal, service: ScraperServiceDep
) -> ScraperOut:
    scraper = await service.create(principal.owner, body)
    return (await service.render_many([scraper]))[0]


@router.get("", response_model=ScraperList, responses={**AUTH_ERRORS, **BAD_CURSOR})
async def list_scrapers(
    principal: ReadPrincipal,
    service: ScraperServiceDep,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    cursor: Annotated[str | None, Query(max_length=20)] = None,
    status: ScraperStatus | None = None,
) -> ScraperList:
    rows = list(
        await service.scrapers.page(
            principal.owner, limit=limit + 1, before_id=decode_id_cursor(cursor), status=status
        )
    )
    next_cursor = str(rows[limit - 1].id) if len(rows) > limit else None
    return ScraperList(data=await service.render_many(rows[:limit]), next_cursor=next_cursor)


@router.get("/{scraper_id}", response_model=ScraperOut, responses={**AUTH_ERRORS, **NOT_FOUND})
async def get_scraper(
    scraper_id: DbId, principal: ReadPrincipal, service: ScraperServiceDep
) -> ScraperOut:
    return (await service.render_many([await service.get(principal.owner, scraper_id)]))[0]


@router.patch(
    "/{scraper_id}", response_model=ScraperOut, responses={**AUTH_ERRORS, **NOT_FOUND, **INVALID}
)
async def update_scraper(
    scraper_id: DbId, body: ScraperPatch, principal: WritePrincipal, service: ScraperServiceDep
) -> ScraperOut:
    scraper = await service.update(principal.owner, scraper_id, body)
    return (await service.render_many([scraper]))[0]


@router.delete(
    "/{scraper_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
    responses={**AUTH_ERRORS, **NOT_FOUND},
)
async def delete_scraper(
    scraper_id: DbId, principal: AdminPrincipal, service: ScraperServiceDep
) -> None:
    await service.delete(principal.owner, scraper_id)


@router.post(
    "/{scraper_id}/run",
    response_model=RunStarted,
    status_code=status.HTTP_202_ACCEPTED,
    responses={**AUTH_ERRORS, **NOT_FOUND, **CONFLICT},
)
async def run_scraper(
    scraper_id: DbId,
    principal: WritePrincipal,
    service: ScraperServiceDep,
    request: Request,
    background: BackgroundTasks,
) -> RunStarted:
    run = await service.start_run(principal.owner, scraper_id)
    assert run.id is not None
    # After the commit: a worker that takes the message must find the run.
    background.add_task(enqueue_run, request.app.state.runtime, run.id)
    return RunStarted(run_id=run.id, status="started")


@router.post(
    "/{scraper_id}/stop",
    response_model=RunStopping,
    status_code=status.HTTP_202_ACCEPTED,
    responses={**AUTH_ERRORS, **NOT_FOUND, **CONFLICT},
)
async def stop_scraper(
    scraper_id: DbId,
    principal: WritePrincipal,
    service: ScraperServiceDep,
    request: Request,
    background: BackgroundTasks,
) -> RunStopping:
    run = await service.stop(principal.owner, scraper_id)
    assert run is not None
    assert run.id is not None
    if run.status == "running":
        # Reaches whichever worker runs the crawl at once; the heartbeat is the fall-back.
        background.add_task(signal_stop, request.app.state.runtime, run.id)
    return RunStopping(run_id=run.id, status="stopped" if run.status == "stopped" else "stopping")


@router.get(
    "/{scraper_id}/status", response_model=StatusView, responses={**AUTH_ERRORS, **NOT_FOUND}
)
async def scraper_status(
    scraper_id: DbId, principal: ReadPrincipal, service: ScraperServiceDep
) -> StatusView:
    return await service.status(principal.owner, scraper_id)
