"""A run's pages: the run (figures, log, results, changes), its live view, its items one by
one, and its downloads (results, changes, log). The live view looks again only when the
worker announces the run, in a short session of its own."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from functools import partial
from typing import Annotated, Any, Literal

from fastapi import Path, Query, Request
from fastapi.responses import HTMLResponse, Response, StreamingResponse
from servicekit.auth import AccessLevel
from servicekit.web.live import LiveHubDep
from servicekit.web.pages import PageEvent, PagesDep, PageSessionDep, event_stream, page_router
from servicekit.web.params import DbId

from scraper_manager.dashboard.live import RateMeter, requests_made
from scraper_manager.dashboard.routes.common import (
    PREFIX,
    OwnRun,
    OwnScraper,
    attachment,
    cell,
    duration,
    full,
    level_filter,
    short_url,
)
from scraper_manager.models import (
    FINAL_RUN_STATUSES,
    ChangeKind,
    LogLevel,
    Run,
    RunLogLine,
    RunStatus,
)
from scraper_manager.runlog.dependencies import RunLogServiceDep
from scraper_manager.runlog.repository import RunLogRepository
from scraper_manager.runs.dependencies import RunServiceDep
from scraper_manager.runs.repository import RunRepository
from scraper_manager.runs.service import RunService

PREVIEW_ITEMS = 50
BROWSE_ITEMS = 50
LOG_TAIL = 200
# Changes shown on a run's page; the downloads hold them all.
CHANGES_SHOWN = 100
DOWNLOADS = ("json", "jsonl", "csv", "xlsx")

router = page_router()


@router.get("/scrapers/{scraper_id}/runs/{run_id}")
async def run_page(
    request: Request,
    pages: PagesDep,
    user: PageSessionDep,
    scraper: OwnScraper,
    run: OwnRun,
    runs: RunServiceDep,
    logs: RunLogServiceDep,
    least: Annotated[str, Query(alias="level", max_length=16)] = "",
    q: Annotated[str, Query(max_length=200)] = "",
    kind: Annotated[str, Query(max_length=16)] = "",
) -> HTMLResponse:
    # Read as text: "all" sends `kind=`; an unknown kind shows all rather than a 422 page.
    change_kind = kind if kind in {k.value for k in ChangeKind} else ""
    shown = (
        await runs.changes(
            run,
            kind=ChangeKind(change_kind) if change_kind else None,
            limit=CHANGES_SHOWN,
            cursor=None,
        )
        if run.changes is not None
        else None
    )
    # Read as text: the form's "all" sends `level=`, which is no filter, not a 422.
    level = level_filter(least)
    search = q.strip()
    lines = await logs.lines.page(
        run.id, after=None, limit=LOG_TAIL, level=level, contains=search or None
    )
    results = await results_preview(runs, run)
    return pages.render(
        request,
        "dashboard/run.html",
        {
            "title": f"Run #{run.number} of {scraper.name}",
            "scraper": scraper,
            "run": run,
            "lines": lines,
            "level": level.value if level else "",
            "q": search,
            "level_options": [("", "all"), *[(lv.value, lv.value) for lv in LogLevel]],
            **results,
            "changes": shown.items if shown else [],
            "more_changes": bool(shown and shown.next_cursor),
            "change_kind": change_kind,
            "live": run.status not in FINAL_RUN_STATUSES and run.status != RunStatus.SKIPPED,
            "duration": duration,
            "can_write": user.can(AccessLevel.WRITE),
        },
    )


@router.get("/scrapers/{scraper_id}/runs/{run_id}/live")
async def live(
    scraper_id: DbId,
    run_id: DbId,
    request: Request,
    pages: PagesDep,
    user: PageSessionDep,
    scraper: OwnScraper,
    run: OwnRun,
    runs: RunServiceDep,
    hub: LiveHubDep,
    least: Annotated[str, Query(alias="level", max_length=16)] = "",
    after: Annotated[int, Query(ge=0)] = 0,
    q: Annotated[str, Query(max_length=200)] = "",
) -> Response:
    max_pages, rate_limit = scraper.max_pages, scraper.rate_limit
    can_stop = user.can(AccessLevel.WRITE)
    factory = request.app.state.session_factory
    search = q.strip() or None
    level = level_filter(least)

    async def look(position: int) -> tuple[Run | None, list[RunLogLine]]:
        # A short session per look, made only after the worker announced the run: an open
        # stream holds no connection and polls nothing.
        async with factory() as db:
            current = await RunRepository(db).get(run.scraper_id, run.id)
            if current is None:
                return None, []
            lines = await RunLogRepository(db).page(
                current.id, after=position, limit=LOG_TAIL, level=level, contains=search
            )
        return current, list(lines)

    async def final_results(current: Run) -> dict[str, Any]:
        async with factory() as db:
            return await results_preview(RunService(db, factory), current)

    stream = hub.open(user.session_id, user.owner, str(run.id))  # 429 past a cap

    async def events() -> AsyncIterator[PageEvent]:
        last = after
        meter = RateMeter()
        async for _ in stream.changes(lambda: pages.session_holds(request)):
            # Pages at the same point of the log share each look (the caught-up ones all).
            position = last
            current, lines = await stream.read((level, search, position), partial(look, position))
            if current is None:
                return
            if lines:
                last = lines[-1].id
                if len(lines) == LOG_TAIL:
                    stream.again()  # more lines are waiting: the next look at once
                yield PageEvent(
                    pages.templates.get_template("dashboard/log_lines.html").render(lines=lines),
                    event="log",
                )
            done = current.status in FINAL_RUN_STATUSES
            figures = pages.templates.get_template("dashboard/progress.html").render(
                run=current,
                duration=duration,
                live=not done,
                max_pages=max_pages,
                rate_limit=rate_limit,
                rate=meter.add(time.monotonic(), requests_made(current)),
            )
            if not done:
                yield PageEvent(figures, event="progress")
                continue
            # The end: the final figures, and the results table in place of its empty
            # state (out of band), so the page settles without a reload.
            results = await stream.read("results", partial(final_results, current))
            table = pages.templates.get_template("dashboard/results.html").render(
                base=f"{PREFIX}/scrapers/{scraper_id}/runs/{run_id}",
                live=False,
                oob=True,
                **results,
            )
            # The Stop button goes with the run (only a writer's page has one).
            gone = '<div id="run-actions" hx-swap-oob="delete"></div>' if can_stop else ""
            # The end is said in the status region, in place of what it held ("Stopping."
            # would otherwise stay above "stopped").
            told = pages.templates.get_template("dashboard/run_ended.html").render(run=current)
            yield PageEvent(figures + table + gone + told, event="done")
            return

    return event_stream(events(), on_close=stream.close, on_shutdown=stream.end)


@router.get("/scrapers/{scraper_id}/runs/{run_id}/items")
async def item_browser(
    scraper_id: DbId,
    run_id: DbId,
    request: Request,
    pages: PagesDep,
    scraper: OwnScraper,
    run: OwnRun,
    runs: RunServiceDep,
    q: Annotated[str, Query(max_length=200)] = "",
    cursor: Annotated[str | None, Query(max_length=20)] = None,
) -> HTMLResponse:
    search = q.strip()
    page = await runs.items(
        run, limit=BROWSE_ITEMS, cursor=cursor, newest_first=False, search=search or None
    )
    keys = await runs.runs.item_keys(run.id)
    return pages.render(
        request,
        "dashboard/items.html",
        {
            "title": f"Items of run #{run.number} of {scraper.name}",
            "scraper": scraper,
            "run": run,
            "q": search,
            "base": f"{PREFIX}/scrapers/{scraper_id}/runs/{run_id}",
            "items": [
                {"id": item.id, "record": {"url": item.url, **item.data}} for item in page.items
            ],
            "columns": ["url", *[k for k in keys if k != "url"]],
            "next_cursor": page.next_cursor,
            "cell": cell,
            "short_url": short_url,
        },
    )


@router.get("/scrapers/{scraper_id}/runs/{run_id}/items/{item_id}")
async def item_page(
    item_id: Annotated[int, Path(ge=1, le=2**63 - 1)],
    request: Request,
    pages: PagesDep,
    scraper: OwnScraper,
    run: OwnRun,
    runs: RunServiceDep,
) -> HTMLResponse:
    item = await runs.item(run, item_id)
    return pages.render(
        request,
        "dashboard/item.html",
        {
            "title": f"Item of run #{run.number} of {scraper.name}",
            "scraper": scraper,
            "run": run,
            "item": item,
            "fields": [(k, *full(v)) for k, v in item.data.items()],
        },
    )


ExportFormat = Literal["json", "jsonl", "csv", "xlsx"]


@router.get("/scrapers/{scraper_id}/runs/{run_id}/results.{fmt}")
async def download(
    run: OwnRun, fmt: ExportFormat, user: PageSessionDep, runs: RunServiceDep
) -> Response:
    return attachment(await runs.export(user.owner, run.scraper_id, run, fmt))


@router.get("/scrapers/{scraper_id}/runs/{run_id}/changes.{fmt}")
async def download_changes(
    run: OwnRun, fmt: ExportFormat, user: PageSessionDep, runs: RunServiceDep
) -> Response:
    return attachment(await runs.export_changes(user.owner, run.scraper_id, run, None, fmt))


@router.get("/scrapers/{scraper_id}/runs/{run_id}/log.txt")
async def log_text(
    scraper_id: DbId, run_id: DbId, user: PageSessionDep, logs: RunLogServiceDep
) -> Response:
    run, body = await logs.text(user.owner, scraper_id, run_id, None)
    # As the API's: a download (so `nosniff` and `no-store`), shown in the browser.
    return StreamingResponse(
        body,
        media_type="text/plain; charset=utf-8",
        headers={"Content-Disposition": f'inline; filename="run-{run.id}.log"'},
    )


async def results_preview(runs: RunService, run: Run) -> dict[str, Any]:
    """What the run page's results section shows: the first items, columns as in the
    exports (`url`, then the items' keys in first-seen order), and the downloads."""
    first, keys = await runs.preview(run, PREVIEW_ITEMS)
    return {
        # The id beside the record, never among its columns: it links the item's own page.
        "items": [{"id": item.id, "record": {"url": item.url, **item.data}} for item in first],
        "columns": ["url", *[k for k in keys if k != "url"]],
        "downloads": DOWNLOADS,
        "cell": cell,
        "short_url": short_url,
    }
