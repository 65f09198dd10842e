"""The dashboard's pages: thin handlers over ScraperService, RunService and RunLogService,
authorised as the API is (the session's owner scopes every read; another owner's ids are 404;
changes need the level the API asks for)."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from functools import partial
from pathlib import Path as FilePath
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo

from fastapi import APIRouter, BackgroundTasks, FastAPI, Form, Path, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse
from pydantic import ValidationError
from servicekit.auth import AccessLevel
from servicekit.contracts.webhook_hub import HubUnavailable
from servicekit.errors import Conflict, Forbidden, ServiceError
from servicekit.web.live import LiveHubDep
from servicekit.web.pages import (
    NavItem,
    PageEvent,
    Pages,
    PageSession,
    PageSessionDep,
    event_stream,
)
from servicekit.web.pages.links import landing_page, signed_in
from servicekit.web.params import MAX_DB_INT, DbId
from servicekit.web.session import SessionDep

from scraper_manager.crawler.queue import enqueue_run
from scraper_manager.crawler.signals import signal_stop
from scraper_manager.dashboard.charts import run_chart, sparkline
from scraper_manager.dashboard.cron_words import describe
from scraper_manager.dashboard.forms import (
    FORM_FIELDS,
    LABELS,
    NEW_FORM,
    ScraperForm,
    form_values,
    parse_selectors,
    preview_firings,
    read_form,
)
from scraper_manager.dashboard.links import dashboard_links
from scraper_manager.dashboard.live import (
    RateMeter,
    average_rate,
    requests_made,
    status_breakdown,
)
from scraper_manager.dashboard.run_compare import compare_runs, default_pair
from scraper_manager.dashboard.selector_preview import (
    PREVIEW_ITEMS as SELECTOR_PREVIEW_ITEMS,
)
from scraper_manager.dashboard.selector_preview import (
    NoStartPage,
    StartPages,
    extract_preview,
)
from scraper_manager.errors import NoPortalYet, UnknownItemKey, UnknownRunEvents
from scraper_manager.events import RUN_EVENT_TYPES
from scraper_manager.models import (
    FINAL_RUN_STATUSES,
    ChangeKind,
    DashboardSession,
    LogLevel,
    Run,
    RunLogLine,
    RunStatus,
    Scraper,
    ScraperStatus,
)
from scraper_manager.runlog.dependencies import RunLogServiceDep
from scraper_manager.runlog.repository import RunLogRepository
from scraper_manager.runs.dependencies import RunServiceDep
from scraper_manager.runs.repository import RunRepository
from scraper_manager.runs.service import RunService
from scraper_manager.scrapers.dependencies import ScraperServiceDep
from scraper_manager.scrapers.schemas import ScraperPatch
from scraper_manager.settings import Settings, SettingsDep
from scraper_manager.webhooks.dependencies import WebhookServiceDep
from scraper_manager.webhooks.schemas import WebhookCreate
from scraper_manager.webhooks.service import WebhookService

PREFIX = "/dashboard"
PREVIEW_ITEMS = 50
BROWSE_ITEMS = 50
LOG_TAIL = 200
# Changes shown on a run's page; the downloads hold them all.
CHANGES_SHOWN = 100
SPARKLINE_RUNS = 10
DOWNLOADS = ("json", "jsonl", "csv", "xlsx")
TONES = {
    "completed": "ok",
    "running": "info",
    "pending": "info",
    "failed": "bad",
    "stopped": "warning",
    "skipped": "neutral",
    "idle": "neutral",
}


def require(session: PageSession, level: AccessLevel) -> None:
    if not session.can(level):
        raise Forbidden(f"This needs a {level.value} session")


def duration(run: Run) -> float | None:
    if run.started_at is None:
        return None
    end = run.finished_at or datetime.now(UTC)
    return round((end - run.started_at).total_seconds(), 1)


def install_dashboard(app: FastAPI, settings: Settings) -> None:
    pages = Pages(
        app,
        settings,
        prefix=PREFIX,
        site_name="Scraper dashboard",
        login_path=f"{PREFIX}/login",
        sessions=DashboardSession,
        logout_path=f"{PREFIX}/logout",
        nav=[
            NavItem("Scrapers", f"{PREFIX}/"),
            NavItem("New scraper", f"{PREFIX}/scrapers/new"),
            NavItem("Webhooks", f"{PREFIX}/webhooks"),
        ],
        template_dirs=[FilePath(__file__).parent / "templates"],
    )
    pages.templates.globals.update(
        tone=lambda status: TONES.get(str(status), "neutral"),
        zone=ZoneInfo,
        in_words=describe,
        average_rate=lambda run: average_rate(run, duration(run)),
        status_breakdown=status_breakdown,
    )
    app.include_router(router(pages))


def router(pages: Pages) -> APIRouter:
    routes = pages.router()

    def refused(target: str, message: str) -> Response:
        """A 409 of the service, told on the page it redirects to."""
        response = RedirectResponse(target, status_code=303)
        pages.flash(response, message, "error")
        return response

    def flash_only(text: str, kind: str) -> HTMLResponse:
        return HTMLResponse(
            pages.templates.get_template("dashboard/flash.html").render(text=text, kind=kind)
        )

    # -- signing in ---------------------------------------------------------------------------

    @routes.get("/login")
    async def login_form(request: Request, next: str | None = None) -> HTMLResponse:
        return pages.render(request, "dashboard/login.html", {"next": next or "", "error": None})

    @routes.post("/login")
    async def login(
        request: Request,
        session: SessionDep,
        api_key: Annotated[str, Form(max_length=200)] = "",
        next: Annotated[str, Form(max_length=2000)] = "",
    ) -> Response:
        principal = await pages.key_sign_in(request, session, api_key)
        if principal is None:
            return pages.render(
                request,
                "dashboard/login.html",
                {"next": next, "error": "That key is not valid."},
                status_code=401,
            )
        response = RedirectResponse(pages.safe_next(next), status_code=303)
        await pages.start_session(
            session, response, principal.owner, principal.level, api_key_id=principal.key_id
        )
        return response

    @routes.get("/link/{token}")
    async def link_landing(request: Request, token: str, session: SessionDep) -> HTMLResponse:
        link = await dashboard_links(session).check(token)
        return landing_page(pages, request, link, destination="the dashboard")

    @routes.post("/link/{token}")
    async def link_open(token: str, session: SessionDep) -> Response:
        link = await dashboard_links(session).redeem(token)
        return await signed_in(pages, session, link, f"{PREFIX}/")

    @routes.post("/logout")
    async def logout(request: Request, session: SessionDep) -> Response:
        response = RedirectResponse(f"{PREFIX}/login", status_code=303)
        await pages.end_session(request, session, response)
        return response

    # -- scrapers -----------------------------------------------------------------------------

    @routes.get("/")
    async def scrapers(
        request: Request,
        user: PageSessionDep,
        service: ScraperServiceDep,
        cursor: Annotated[str | None, Query(max_length=20)] = None,
        q: Annotated[str, Query(max_length=200)] = "",
        status: Annotated[str, Query(max_length=16)] = "",
    ) -> HTMLResponse:
        # Read as text: the form's "any status" sends `status=`, which is no filter, not a 422.
        wanted = status_filter(status)
        search = q.strip()
        page = await service.page(
            user.owner, limit=20, cursor=cursor, status=wanted, search=search or None
        )
        ids = [s.id for s in page.items]
        latest = await service.scrapers.latest_runs(ids)
        trends = await service.scrapers.recent_items(ids, SPARKLINE_RUNS)
        return pages.render(
            request,
            "dashboard/scrapers.html",
            {
                "title": "Scrapers",
                "scrapers": page.items,
                "latest": latest,
                "sparklines": {i: sparkline(trends.get(i, [])) for i in ids},
                "next_cursor": page.next_cursor,
                "can_write": user.can(AccessLevel.WRITE),
                "q": search,
                "status": wanted.value if wanted else "",
                "status_options": [
                    ("", "any status"),
                    *[(v.value, v.value) for v in ScraperStatus],
                ],
                "filtered": bool(search or wanted),
            },
        )

    def form_page(
        request: Request,
        settings: Settings,
        form: ScraperForm,
        *,
        scraper: Scraper | None = None,
        status_code: int = 200,
    ) -> HTMLResponse:
        return pages.render(
            request,
            "dashboard/form.html",
            {
                "title": f"Edit {scraper.name}" if scraper else "New scraper",
                "form": form,
                "scraper": scraper,
                "pools": sorted(settings.proxy_pools),
                "labels": LABELS,
            },
            status_code=status_code,
        )

    @routes.get("/scrapers/new")
    async def new_scraper(
        request: Request, user: PageSessionDep, settings: SettingsDep
    ) -> HTMLResponse:
        require(user, AccessLevel.WRITE)
        form = ScraperForm(dict(NEW_FORM))
        return form_page(request, settings, form)

    @routes.post("/scrapers/new")
    async def create_scraper(
        request: Request, user: PageSessionDep, settings: SettingsDep, service: ScraperServiceDep
    ) -> Response:
        require(user, AccessLevel.WRITE)
        form = read_form(await request.form())
        if form.config is not None:
            try:
                scraper = await service.create(user.owner, form.config)
            except ServiceError as exc:
                form.errors[_field_of(exc)] = exc.message
            else:
                response = RedirectResponse(f"{PREFIX}/scrapers/{scraper.id}", status_code=303)
                pages.flash(response, f"Scraper {scraper.name} created.")
                return response
        return form_page(request, settings, form, status_code=422)

    @routes.get("/scrapers/{scraper_id}/edit")
    async def edit_scraper(
        scraper_id: DbId,
        request: Request,
        user: PageSessionDep,
        settings: SettingsDep,
        service: ScraperServiceDep,
    ) -> HTMLResponse:
        scraper = await service.get(user.owner, scraper_id)
        require(user, AccessLevel.WRITE)
        return form_page(request, settings, ScraperForm(form_values(scraper)), scraper=scraper)

    @routes.post("/scrapers/{scraper_id}/edit")
    async def update_scraper(
        scraper_id: DbId,
        request: Request,
        user: PageSessionDep,
        settings: SettingsDep,
        service: ScraperServiceDep,
    ) -> Response:
        scraper = await service.get(user.owner, scraper_id)
        require(user, AccessLevel.WRITE)
        form = read_form(await request.form())
        if form.config is not None:
            fields = form.config.model_dump(include=set(FORM_FIELDS))
            try:
                await service.update(user.owner, scraper_id, ScraperPatch(**fields))
            except ServiceError as exc:
                form.errors[_field_of(exc)] = exc.message
            else:
                response = RedirectResponse(f"{PREFIX}/scrapers/{scraper_id}", status_code=303)
                pages.flash(response, "Saved.")
                return response
        return form_page(request, settings, form, scraper=scraper, status_code=422)

    @routes.get("/cron-preview")
    async def cron_preview(
        request: Request,
        user: PageSessionDep,
        schedule: Annotated[str, Query(max_length=200)] = "",
        timezone: Annotated[str, Query(max_length=64)] = "UTC",
    ) -> HTMLResponse:
        firings, error = (
            preview_firings(schedule, timezone, datetime.now(UTC)) if schedule else ([], None)
        )
        return pages.render(
            request,
            "dashboard/cron_preview.html",
            {"firings": firings, "error": error, "timezone": timezone, "schedule": schedule},
        )

    # -- the selector editor ------------------------------------------------------------------

    start_pages = StartPages()

    @routes.get("/scrapers/{scraper_id}/selectors")
    async def selector_editor(
        scraper_id: DbId, request: Request, user: PageSessionDep, service: ScraperServiceDep
    ) -> HTMLResponse:
        scraper = await service.get(user.owner, scraper_id)
        require(user, AccessLevel.WRITE)  # it makes the service fetch a page
        return pages.render(
            request,
            "dashboard/selectors.html",
            {
                "title": f"Selectors of {scraper.name}",
                "scraper": scraper,
                "item_selector": scraper.item_selector or "",
                "selectors": "\n".join(f"{k}: {v}" for k, v in scraper.selectors.items()),
                "error": None,
            },
        )

    @routes.get("/scrapers/{scraper_id}/selectors/preview")
    async def selector_preview(
        scraper_id: DbId,
        request: Request,
        user: PageSessionDep,
        service: ScraperServiceDep,
        settings: SettingsDep,
        item_selector: Annotated[str, Query(max_length=500)] = "",
        selectors: Annotated[str, Query(max_length=10_000)] = "",
        fetch: Annotated[str, Query(max_length=10)] = "",
    ) -> HTMLResponse:
        scraper = await service.get(user.owner, scraper_id)
        require(user, AccessLevel.WRITE)
        page = await start_pages.get(scraper, settings, fresh=fetch == "again")
        context: dict[str, Any] = {"scraper": scraper, "limit": SELECTOR_PREVIEW_ITEMS}
        if isinstance(page, NoStartPage):
            context.update(page=None, reason=page.reason, extracted=None)
        else:
            context.update(
                page=page,
                age=round(time.monotonic() - page.fetched_at),
                reason=None,
                extracted=extract_preview(page, item_selector, selectors),
            )
        return pages.render(request, "dashboard/selector_preview.html", context)

    @routes.post("/scrapers/{scraper_id}/selectors")
    async def save_selectors(
        scraper_id: DbId,
        request: Request,
        user: PageSessionDep,
        service: ScraperServiceDep,
        item_selector: Annotated[str, Form(max_length=500)] = "",
        selectors: Annotated[str, Form(max_length=10_000)] = "",
    ) -> Response:
        scraper = await service.get(user.owner, scraper_id)
        require(user, AccessLevel.WRITE)
        parsed, error = parse_selectors(selectors)
        if error is None:
            try:
                await service.update(
                    user.owner,
                    scraper_id,
                    ScraperPatch(selectors=parsed, item_selector=item_selector.strip() or None),
                )
            except ServiceError as exc:
                error = exc.message
            else:
                response = RedirectResponse(f"{PREFIX}/scrapers/{scraper_id}", status_code=303)
                pages.flash(response, "Selectors saved.")
                return response
        return pages.render(
            request,
            "dashboard/selectors.html",
            {
                "title": f"Selectors of {scraper.name}",
                "scraper": scraper,
                "item_selector": item_selector,
                "selectors": selectors,
                "error": error,
            },
            status_code=422,
        )

    @routes.get("/scrapers/{scraper_id}/compare")
    async def compare_two_runs(
        scraper_id: DbId,
        request: Request,
        user: PageSessionDep,
        service: ScraperServiceDep,
        runs: RunServiceDep,
        first: Annotated[int | None, Query(ge=1, le=MAX_DB_INT)] = None,
        second: Annotated[int | None, Query(ge=1, le=MAX_DB_INT)] = None,
    ) -> HTMLResponse:
        scraper = await service.get(user.owner, scraper_id)
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

    @routes.get("/scrapers/{scraper_id}")
    async def scraper_page(
        scraper_id: DbId,
        request: Request,
        user: PageSessionDep,
        service: ScraperServiceDep,
        runs: RunServiceDep,
        settings: SettingsDep,
        cursor: Annotated[str | None, Query(max_length=20)] = None,
    ) -> HTMLResponse:
        scraper = await service.get(user.owner, scraper_id)
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

    @routes.post("/scrapers/{scraper_id}/run")
    async def run_now(
        scraper_id: DbId,
        request: Request,
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
                return refused(f"{PREFIX}/scrapers/{scraper_id}", f"Not started: {exc.message}.")
            response = RedirectResponse(
                f"{PREFIX}/scrapers/{scraper_id}/runs/{active.id}", status_code=303
            )
            pages.flash(response, f"Run #{active.number} is already under way.", "info")
            return response
        background.add_task(enqueue_run, request.app.state.runtime, run.id)
        return RedirectResponse(f"{PREFIX}/scrapers/{scraper_id}/runs/{run.id}", status_code=303)

    @routes.post("/scrapers/{scraper_id}/stop")
    async def stop(
        scraper_id: DbId,
        request: Request,
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
                return flash_only(f"Nothing to stop: {exc.message}.", "error")
            return refused(target, f"Nothing to stop: {exc.message}.")
        if run.status == RunStatus.RUNNING:
            background.add_task(signal_stop, request.app.state.runtime, run.id)
        if from_live_page:
            return flash_only("Stopping.", "info")
        response = RedirectResponse(f"{target}/runs/{run.id}", status_code=303)
        pages.flash(response, "Stopping.", "info")
        return response

    @routes.post("/scrapers/{scraper_id}/delete")
    async def delete(
        scraper_id: DbId, user: PageSessionDep, service: ScraperServiceDep
    ) -> Response:
        await service.get(user.owner, scraper_id)
        require(user, AccessLevel.ADMIN)
        await service.delete(user.owner, scraper_id)
        response = RedirectResponse(f"{PREFIX}/", status_code=303)
        pages.flash(response, "Scraper deleted.")
        return response

    # -- runs ---------------------------------------------------------------------------------

    @routes.get("/scrapers/{scraper_id}/runs/{run_id}")
    async def run_page(
        scraper_id: DbId,
        run_id: DbId,
        request: Request,
        user: PageSessionDep,
        service: ScraperServiceDep,
        runs: RunServiceDep,
        logs: RunLogServiceDep,
        least: Annotated[str, Query(alias="level", max_length=16)] = "",
        q: Annotated[str, Query(max_length=200)] = "",
        kind: Annotated[str, Query(max_length=16)] = "",
    ) -> HTMLResponse:
        scraper = await service.get(user.owner, scraper_id)
        run = await runs.get(user.owner, scraper_id, run_id)
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

    @routes.get("/scrapers/{scraper_id}/runs/{run_id}/live")
    async def live(
        scraper_id: DbId,
        run_id: DbId,
        request: Request,
        user: PageSessionDep,
        service: ScraperServiceDep,
        runs: RunServiceDep,
        hub: LiveHubDep,
        least: Annotated[str, Query(alias="level", max_length=16)] = "",
        after: Annotated[int, Query(ge=0)] = 0,
        q: Annotated[str, Query(max_length=200)] = "",
    ) -> Response:
        scraper = await service.get(user.owner, scraper_id)
        run = await runs.get(user.owner, scraper_id, run_id)
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
                current, lines = await stream.read(
                    (level, search, position), partial(look, position)
                )
                if current is None:
                    return
                if lines:
                    last = lines[-1].id
                    if len(lines) == LOG_TAIL:
                        stream.again()  # more lines are waiting: the next look at once
                    yield PageEvent(
                        pages.templates.get_template("dashboard/log_lines.html").render(
                            lines=lines
                        ),
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

    @routes.get("/scrapers/{scraper_id}/runs/{run_id}/items")
    async def item_browser(
        scraper_id: DbId,
        run_id: DbId,
        request: Request,
        user: PageSessionDep,
        service: ScraperServiceDep,
        runs: RunServiceDep,
        q: Annotated[str, Query(max_length=200)] = "",
        cursor: Annotated[str | None, Query(max_length=20)] = None,
    ) -> HTMLResponse:
        scraper = await service.get(user.owner, scraper_id)
        run = await runs.get(user.owner, scraper_id, run_id)
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
                "cell": _cell,
                "short_url": short_url,
            },
        )

    @routes.get("/scrapers/{scraper_id}/runs/{run_id}/items/{item_id}")
    async def item_page(
        scraper_id: DbId,
        run_id: DbId,
        item_id: Annotated[int, Path(ge=1, le=2**63 - 1)],
        request: Request,
        user: PageSessionDep,
        service: ScraperServiceDep,
        runs: RunServiceDep,
    ) -> HTMLResponse:
        scraper = await service.get(user.owner, scraper_id)
        run = await runs.get(user.owner, scraper_id, run_id)
        item = await runs.item(run, item_id)
        return pages.render(
            request,
            "dashboard/item.html",
            {
                "title": f"Item of run #{run.number} of {scraper.name}",
                "scraper": scraper,
                "run": run,
                "item": item,
                "fields": [(k, *_full(v)) for k, v in item.data.items()],
            },
        )

    @routes.get("/scrapers/{scraper_id}/runs/{run_id}/results.{fmt}")
    async def download(
        scraper_id: DbId,
        run_id: DbId,
        fmt: Literal["json", "jsonl", "csv", "xlsx"],
        user: PageSessionDep,
        runs: RunServiceDep,
    ) -> Response:
        run = await runs.get(user.owner, scraper_id, run_id)
        export = await runs.export(user.owner, scraper_id, run, fmt)
        return StreamingResponse(
            export.body,
            media_type=export.media_type,
            headers={"Content-Disposition": f'attachment; filename="{export.filename}"'},
        )

    @routes.get("/scrapers/{scraper_id}/runs/{run_id}/changes.{fmt}")
    async def download_changes(
        scraper_id: DbId,
        run_id: DbId,
        fmt: Literal["json", "jsonl", "csv", "xlsx"],
        user: PageSessionDep,
        runs: RunServiceDep,
    ) -> Response:
        run = await runs.get(user.owner, scraper_id, run_id)
        export = await runs.export_changes(user.owner, scraper_id, run, None, fmt)
        return StreamingResponse(
            export.body,
            media_type=export.media_type,
            headers={"Content-Disposition": f'attachment; filename="{export.filename}"'},
        )

    @routes.get("/scrapers/{scraper_id}/runs/{run_id}/log.txt")
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

    # -- webhooks -----------------------------------------------------------------------------

    async def webhooks_page(
        request: Request,
        user: PageSession,
        settings: Settings,
        service: WebhookService,
        *,
        form: dict[str, Any] | None = None,
        errors: dict[str, str] | None = None,
        created: Any = None,
        portal_error: str | None = None,
        status_code: int = 200,
    ) -> HTMLResponse:
        return pages.render(
            request,
            "dashboard/webhooks.html",
            {
                "title": "Webhooks",
                "webhooks": await service.with_deliveries(
                    user.owner, settings.dashboard_deliveries
                ),
                "event_types": RUN_EVENT_TYPES,
                "form": form or {"url": "", "events": []},
                "errors": errors or {},
                "created": created,
                "portal_error": portal_error,
                "can_write": user.can(AccessLevel.WRITE),
                "can_delete": user.can(AccessLevel.ADMIN),
            },
            status_code=status_code,
        )

    @routes.get("/webhooks")
    async def webhooks(
        request: Request, user: PageSessionDep, settings: SettingsDep, service: WebhookServiceDep
    ) -> HTMLResponse:
        return await webhooks_page(request, user, settings, service)

    @routes.post("/webhooks")
    async def add_webhook(
        request: Request, user: PageSessionDep, settings: SettingsDep, service: WebhookServiceDep
    ) -> HTMLResponse:
        require(user, AccessLevel.WRITE)
        data = await request.form()
        form = {
            "url": str(data.get("url", "") or "").strip(),
            "events": [str(e) for e in data.getlist("events")],
        }
        errors: dict[str, str] = {}
        try:
            body = WebhookCreate.model_validate(form)
        except ValidationError as exc:
            for error in exc.errors():
                where = str(error["loc"][0]) if error["loc"] else "url"
                errors.setdefault(where, str(error["msg"]).removeprefix("Value error, "))
        else:
            try:
                created = await service.register(user.owner, None, body)
            except ServiceError as exc:
                errors["events" if isinstance(exc, UnknownRunEvents) else "url"] = exc.message
            else:
                # Rendered, not redirected: the secret is shown this once and never stored
                # in a cookie.
                return await webhooks_page(
                    request, user, settings, service, created=created, status_code=201
                )
        return await webhooks_page(
            request, user, settings, service, form=form, errors=errors, status_code=422
        )

    @routes.post("/webhooks/portal")
    async def open_portal(
        request: Request, user: PageSessionDep, settings: SettingsDep, service: WebhookServiceDep
    ) -> HTMLResponse:
        """A fresh one-time link into webhook-hub's portal for this user, asked on the click
        (a POST: it mints a credential). The browser is sent on by the answer page's meta
        refresh, not a 303: the page's CSP (`form-action 'self'`) stops a form's redirect to
        another origin in Chromium."""
        try:
            issued = await service.portal_link(user.owner, user.level)
        except (HubUnavailable, NoPortalYet) as exc:
            return await webhooks_page(
                request,
                user,
                settings,
                service,
                portal_error=exc.message,
                status_code=exc.status_code,
            )
        return pages.render(
            request,
            "dashboard/portal_open.html",
            {"title": "Opening the delivery portal", "url": issued.url},
        )

    @routes.post("/webhooks/{webhook_id}/delete")
    async def remove_webhook(
        webhook_id: Annotated[str, Path(max_length=64)],
        user: PageSessionDep,
        service: WebhookServiceDep,
    ) -> Response:
        require(user, AccessLevel.ADMIN)
        await service.delete(user.owner, webhook_id)
        response = RedirectResponse(f"{PREFIX}/webhooks", status_code=303)
        pages.flash(response, "Webhook removed.")
        return response

    return routes


async def results_preview(runs: RunService, run: Run) -> dict[str, Any]:
    """What the run page's results section shows: the first items, columns as in the
    exports (`url`, then the items' keys in first-seen order), and the downloads."""
    first, keys = await runs.preview(run, PREVIEW_ITEMS)
    return {
        # The id beside the record, never among its columns: it links the item's own page.
        "items": [{"id": item.id, "record": {"url": item.url, **item.data}} for item in first],
        "columns": ["url", *[k for k in keys if k != "url"]],
        "downloads": DOWNLOADS,
        "cell": _cell,
        "short_url": short_url,
    }


def short_url(url: str) -> str:
    """A crawled URL as a cut-short cell shows it: its path and query (the host is mostly the
    start URL's, and would leave every cut cell alike), or the URL when it has no path."""
    parts = urlsplit(url)
    rest = parts.path + (f"?{parts.query}" if parts.query else "")
    return rest if rest not in ("", "/") else url


def level_filter(text: str) -> LogLevel | None:
    """The log's least level: a level, or none for empty or unknown text (total)."""
    try:
        return LogLevel(text)
    except ValueError:
        return None


def status_filter(text: str) -> ScraperStatus | None:
    """The list's status filter: a status, or none for empty or unknown text (total)."""
    try:
        return ScraperStatus(text)
    except ValueError:
        return None


def _field_of(error: ServiceError) -> str:
    """Which form field a service refusal belongs to."""
    if isinstance(error, UnknownItemKey):
        return "item_key"
    code = getattr(error, "code", "")
    return {"unknown_proxy_pool": "proxy_pool", "address_not_allowed": "url"}.get(code, "name")


def _full(value: Any) -> tuple[str, bool]:
    """A value in full, for an item's page: nested values as indented JSON (and said so)."""
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False, indent=2), True
    return _cell(value), False


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False)
    return str(value)
