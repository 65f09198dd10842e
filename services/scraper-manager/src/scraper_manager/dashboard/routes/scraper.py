"""A scraper's page (its runs, their chart, its settings in words), the comparison of two of
its runs, and its actions: run now, stop, delete."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import BackgroundTasks, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from servicekit.auth import AccessLevel
from servicekit.errors import Conflict
from servicekit.web.pages import PagesDep, PageSessionDep, page_router
from servicekit.web.params import MAX_DB_INT, DbId

from scraper_manager.crawler.queue import enqueue_run
from scraper_manager.crawler.signals import signal_stop
from scraper_manager.dashboard.charts import run_chart
from scraper_manager.dashboard.routes.common import (
    PREFIX,
    OwnScraper,
    duration,
    flash_only,
    redirected,
    refused,
    require,
)
from scraper_manager.dashboard.run_compare import compare_runs, default_pair
from scraper_manager.models import RunStatus
from scraper_manager.runs.dependencies import RunServiceDep
from scraper_manager.scrapers.dependencies import ScraperServiceDep
from scraper_manager.settings import SettingsDep

router = page_router()


@router.get("/scrapers/{scraper_id}/compare")
async def compare_two_runs(
    scraper_id: DbId,
    request: Request,
    pages: PagesDep,
    user: PageSessionDep,
    scraper: OwnScraper,
    runs: RunServiceDep,
    first: Annotated[int | None, Query(ge=1, le=MAX_DB_INT)] = None,
    second: Annotated[int | None, Query(ge=1, le=MAX_DB_INT)] = None,
) -> HTMLResponse:
    recent = (await runs.page(user.owner, scraper_id, limit=50, cursor=None, status=None)).items
    if first is None or second is None:
        pair = default_pair(recent)
        first, second = pair if pair is not None else (first, second)
    context: dict[str, Any] = {
        "title": f"Compare runs of {scraper.name}",
        "scraper": scraper,
        "recent": recent,
        "first": None,
        "second": None,
        "comparison": None,
    }
    if first is not None and second is not None:
        a = await runs.get(user.owner, scraper_id, first)
        b = await runs.get(user.owner, scraper_id, second)
        context.update(first=a, second=b, comparison=compare_runs(a, b))
    return pages.render(request, "dashboard/compare.html", context)


@router.get("/scrapers/{scraper_id}")
async def scraper_page(
    scraper_id: DbId,
    request: Request,
    pages: PagesDep,
    user: PageSessionDep,
    service: ScraperServiceDep,
    scraper: OwnScraper,
    runs: RunServiceDep,
    settings: SettingsDep,
    cursor: Annotated[str | None, Query(max_length=20)] = None,
) -> HTMLResponse:
    view = await service.render(scraper)
    history = await runs.page(user.owner, scraper_id, limit=20, cursor=cursor, status=None)
    active = await service.scrapers.active_run(scraper_id)
    return pages.render(
        request,
        "dashboard/scraper.html",
        {
            "title": scraper.name,
            "scraper": view,
            "active_run": active,
            "runs": history.items,
            "chart": run_chart(
                [
                    (f"#{r.number}", r.pages_fetched, r.items_collected)
                    for r in history.items[::-1]
                    if r.status != RunStatus.SKIPPED
                ]
            ),
            "next_cursor": history.next_cursor,
            "duration": duration,
            "retention_days": f"{settings.result_retention_days:g}",
            "can_write": user.can(AccessLevel.WRITE),
            "can_delete": user.can(AccessLevel.ADMIN),
        },
    )


@router.post("/scrapers/{scraper_id}/run")
async def run_now(
    scraper_id: DbId,
    request: Request,
    pages: PagesDep,
    user: PageSessionDep,
    service: ScraperServiceDep,
    background: BackgroundTasks,
) -> Response:
    require(user, AccessLevel.WRITE)
    try:
        run = await service.start_run(user.owner, scraper_id)
    except Conflict as exc:
        # A page drawn before the run began still offered Run now: the person is shown
        # the run under way (which they can stop there) rather than a refusal.
        active = await service.scrapers.active_run(scraper_id)
        if active is None:
            return refused(pages, f"{PREFIX}/scrapers/{scraper_id}", f"Not started: {exc.message}.")
        return redirected(
            pages,
            f"{PREFIX}/scrapers/{scraper_id}/runs/{active.id}",
            f"Run #{active.number} is already under way.",
            "info",
        )
    background.add_task(enqueue_run, request.app.state.runtime, run.id)
    return RedirectResponse(f"{PREFIX}/scrapers/{scraper_id}/runs/{run.id}", status_code=303)


@router.post("/scrapers/{scraper_id}/stop")
async def stop(
    scraper_id: DbId,
    request: Request,
    pages: PagesDep,
    user: PageSessionDep,
    service: ScraperServiceDep,
    background: BackgroundTasks,
) -> Response:
    require(user, AccessLevel.WRITE)
    target = f"{PREFIX}/scrapers/{scraper_id}"
    # htmx's post from the live run page: the page stays, so the answer is only the
    # message for its flash region (a 200: htmx swaps no error answer in).
    from_live_page = request.headers.get("HX-Request") == "true"
    try:
        run = await service.stop(user.owner, scraper_id)
    except Conflict as exc:
        if from_live_page:
            return flash_only(pages, f"Nothing to stop: {exc.message}.", "error")
        return refused(pages, target, f"Nothing to stop: {exc.message}.")
    if run.status == RunStatus.RUNNING:
        background.add_task(signal_stop, request.app.state.runtime, run.id)
    if from_live_page:
        return flash_only(pages, "Stopping.", "info")
    return redirected(pages, f"{target}/runs/{run.id}", "Stopping.", "info")


@router.post("/scrapers/{scraper_id}/delete")
async def delete(
    pages: PagesDep, scraper_id: DbId, user: PageSessionDep, service: ScraperServiceDep
) -> Response:
    await service.get(user.owner, scraper_id)
    require(user, AccessLevel.ADMIN)
    await service.delete(user.owner, scraper_id)
    return redirected(pages, f"{PREFIX}/", "Scraper deleted.")
