"""The scrapers' list (searched, filtered by status, each with its latest run and a sparkline
of its recent items) and the form that creates or edits one, with its schedule's preview."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import Query, Request
from fastapi.responses import HTMLResponse, Response
from servicekit.auth import AccessLevel
from servicekit.errors import ServiceError
from servicekit.web.pages import Pages, PagesDep, PageSessionDep, page_router
from servicekit.web.params import DbId

from scraper_manager.dashboard.charts import sparkline
from scraper_manager.dashboard.forms import (
    FORM_FIELDS,
    LABELS,
    NEW_FORM,
    ScraperForm,
    form_values,
    preview_firings,
    read_form,
)
from scraper_manager.dashboard.routes.common import (
    PREFIX,
    EditableScraper,
    redirected,
    require,
    status_filter,
)
from scraper_manager.errors import UnknownItemKey
from scraper_manager.models import Scraper, ScraperStatus
from scraper_manager.scrapers.dependencies import ScraperServiceDep
from scraper_manager.scrapers.schemas import ScraperPatch
from scraper_manager.settings import Settings, SettingsDep

SPARKLINE_RUNS = 10

router = page_router()


@router.get("/")
async def scrapers(
    request: Request,
    pages: PagesDep,
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
    pages: Pages,
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


@router.get("/scrapers/new")
async def new_scraper(
    request: Request, pages: PagesDep, user: PageSessionDep, settings: SettingsDep
) -> HTMLResponse:
    require(user, AccessLevel.WRITE)
    form = ScraperForm(dict(NEW_FORM))
    return form_page(pages, request, settings, form)


@router.post("/scrapers/new")
async def create_scraper(
    request: Request,
    pages: PagesDep,
    user: PageSessionDep,
    settings: SettingsDep,
    service: ScraperServiceDep,
) -> Response:
    require(user, AccessLevel.WRITE)
    form = read_form(await request.form())
    if form.config is not None:
        try:
            scraper = await service.create(user.owner, form.config)
        except ServiceError as exc:
            form.errors[field_of(exc)] = exc.message
        else:
            return redirected(
                pages, f"{PREFIX}/scrapers/{scraper.id}", f"Scraper {scraper.name} created."
            )
    return form_page(pages, request, settings, form, status_code=422)


@router.get("/scrapers/{scraper_id}/edit")
async def edit_scraper(
    request: Request,
    pages: PagesDep,
    settings: SettingsDep,
    scraper: EditableScraper,
) -> HTMLResponse:
    return form_page(pages, request, settings, ScraperForm(form_values(scraper)), scraper=scraper)


@router.post("/scrapers/{scraper_id}/edit")
async def update_scraper(
    scraper_id: DbId,
    request: Request,
    pages: PagesDep,
    user: PageSessionDep,
    settings: SettingsDep,
    service: ScraperServiceDep,
    scraper: EditableScraper,
) -> Response:
    form = read_form(await request.form())
    if form.config is not None:
        fields = form.config.model_dump(include=set(FORM_FIELDS))
        try:
            await service.update(user.owner, scraper_id, ScraperPatch(**fields))
        except ServiceError as exc:
            form.errors[field_of(exc)] = exc.message
        else:
            return redirected(pages, f"{PREFIX}/scrapers/{scraper_id}", "Saved.")
    return form_page(pages, request, settings, form, scraper=scraper, status_code=422)


@router.get("/cron-preview")
async def cron_preview(
    request: Request,
    pages: PagesDep,
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


def field_of(error: ServiceError) -> str:
    """Which form field a service refusal belongs to."""
    if isinstance(error, UnknownItemKey):
        return "item_key"
    code = getattr(error, "code", "")
    return {"unknown_proxy_pool": "proxy_pool", "address_not_allowed": "url"}.get(code, "name")
