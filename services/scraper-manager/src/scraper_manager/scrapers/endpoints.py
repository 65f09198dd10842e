"""`/api/v1/scrapers`: thin HTTP over ScraperService."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, BackgroundTasks, Query, Request, Response, status
from servicekit.auth.dependencies import AdminPrincipal, ReadPrincipal, WritePrincipal
from servicekit.web.params import DbId

from scraper_manager.crawler.queue import enqueue_run
from scraper_manager.crawler.signals import signal_stop
from scraper_manager.errors import (
    AUTH,
    AddressNotAllowed,
    AlreadyRunning,
    InvalidCursor,
    NotRunning,
    RequestInvalid,
    ScraperLimitReached,
    ScraperNotFound,
    UnknownProxyPool,
    declared,
)
from scraper_manager.models import RunStatus, ScraperStatus
from scraper_manager.scrapers.dependencies import ScraperServiceDep
from scraper_manager.scrapers.schemas import (
    RunStarted,
    RunStopping,
    ScraperConfig,
    ScraperList,
    ScraperOut,
    ScraperPatch,
    StatusView,
)

router = APIRouter(prefix="/scrapers", tags=["scrapers"])
CONFIG_ERRORS = (RequestInvalid, UnknownProxyPool, AddressNotAllowed)


@router.post(
    "",
    response_model=ScraperOut,
    status_code=status.HTTP_201_CREATED,
    summary="Create a scraper",
    description=(
        "Registers a scraper: where it starts (`url`), what it collects (`selectors`, "
        "`item_selector`), which links it follows (`follow`), how fast (`rate_limit`, "
        "`concurrency`) and when (`schedule`, a cron expression in `timezone`; registered with "
        "the scheduler at once). Only `name` and `url` are required. A client may have "
        "`MAX_SCRAPERS_PER_CLIENT` (50) scrapers."
    ),
    responses=declared(*AUTH, ScraperLimitReached, *CONFIG_ERRORS),
)
async def create_scraper(
    body: ScraperConfig, principal: WritePrincipal, service: ScraperServiceDep
) -> ScraperOut:
    return await service.render(await service.create(principal.owner, body))


@router.get(
    "",
    response_model=ScraperList,
    summary="List scrapers",
    description=(
        "The client's scrapers, newest first, `limit` per page; pass `next_cursor` back as "
        "`cursor` for the next page. `status` keeps those whose current status is that."
    ),
    responses=declared(*AUTH, InvalidCursor, RequestInvalid),
)
async def list_scrapers(
    principal: ReadPrincipal,
    service: ScraperServiceDep,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    cursor: Annotated[str | None, Query(max_length=20)] = None,
    status: ScraperStatus | None = None,
) -> ScraperList:
    page = await service.page(principal.owner, limit=limit, cursor=cursor, status=status)
    return ScraperList(data=page.items, next_cursor=page.next_cursor)


@router.get(
    "/{scraper_id}",
    response_model=ScraperOut,
    summary="Get a scraper",
    description="The scraper's configuration, current status and next scheduled run.",
    responses=declared(*AUTH, ScraperNotFound, RequestInvalid),
)
async def get_scraper(
    scraper_id: DbId, principal: ReadPrincipal, service: ScraperServiceDep
) -> ScraperOut:
    return await service.render(await service.get(principal.owner, scraper_id))


@router.patch(
    "/{scraper_id}",
    response_model=ScraperOut,
    summary="Update a scraper",
    description=(
        "Changes the given fields only, validated as at creation; `null` clears a nullable "
        "field. The schedule is registered again, so `next_run_at` follows the new one."
    ),
    responses=declared(*AUTH, ScraperNotFound, *CONFIG_ERRORS),
)
async def update_scraper(
    scraper_id: DbId, body: ScraperPatch, principal: WritePrincipal, service: ScraperServiceDep
) -> ScraperOut:
    return await service.render(await service.update(principal.owner, scraper_id, body))


@router.delete(
    "/{scraper_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
    summary="Delete a scraper",
    description=(
        "Deletes the scraper with its runs and results; a run in progress is stopped first "
        "and the schedule goes with it. Needs an admin key."
    ),
    responses=declared(*AUTH, ScraperNotFound, RequestInvalid),
)
async def delete_scraper(
    scraper_id: DbId, principal: AdminPrincipal, service: ScraperServiceDep
) -> None:
    await service.delete(principal.owner, scraper_id)


@router.post(
    "/{scraper_id}/run",
    response_model=RunStarted,
    status_code=status.HTTP_202_ACCEPTED,
    summary="Run a scraper now",
    description=(
        "Creates a `pending` run and queues it for a worker; follow it with "
        "`GET /scrapers/{id}/status` or `GET /scrapers/{id}/runs/{run_id}`. 409 while the "
        "scraper is already running (no run is created)."
    ),
    responses=declared(*AUTH, ScraperNotFound, AlreadyRunning, RequestInvalid),
)
async def run_scraper(
    scraper_id: DbId,
    principal: WritePrincipal,
    service: ScraperServiceDep,
    request: Request,
    background: BackgroundTasks,
) -> RunStarted:
    run = await service.start_run(principal.owner, scraper_id)
    # After the commit: a worker that takes the message must find the run.
    background.add_task(enqueue_run, request.app.state.runtime, run.id)
    return RunStarted(run_id=run.id, status="started")


@router.post(
    "/{scraper_id}/stop",
    response_model=RunStopping,
    status_code=status.HTTP_202_ACCEPTED,
    summary="Stop a running scraper",
    description=(
        "A pending run is `stopped` at once; a running one is `stopping` until its worker "
        "ends it as `stopped` (within about a second). 409 when nothing is running."
    ),
    responses=declared(*AUTH, ScraperNotFound, NotRunning, RequestInvalid),
)
async def stop_scraper(
    scraper_id: DbId,
    principal: WritePrincipal,
    service: ScraperServiceDep,
    request: Request,
    background: BackgroundTasks,
) -> RunStopping:
    run = await service.stop(principal.owner, scraper_id)
    if run.status == RunStatus.RUNNING:
        # Reaches whichever worker runs the crawl at once; the heartbeat is the fall-back.
        background.add_task(signal_stop, request.app.state.runtime, run.id)
        return RunStopping(run_id=run.id, status="stopping")
    return RunStopping(run_id=run.id, status="stopped")


@router.get(
    "/{scraper_id}/status",
    response_model=StatusView,
    summary="Current status of a scraper",
    description=(
        "The latest run's status, start time and items collected; `idle`, null and 0 when "
        "the scraper never ran. Skipped firings do not count."
    ),
    responses=declared(*AUTH, ScraperNotFound, RequestInvalid),
)
async def scraper_status(
    scraper_id: DbId, principal: ReadPrincipal, service: ScraperServiceDep
) -> StatusView:
    return await service.status(principal.owner, scraper_id)
