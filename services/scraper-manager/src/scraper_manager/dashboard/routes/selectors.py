"""The selector editor: a scraper's item selector and field selectors, tried against its start
page (fetched once and kept a while, `StartPages`, one per app) before they are saved."""

from __future__ import annotations

import time
from typing import Annotated, Any

from fastapi import Depends, Form, Query, Request
from fastapi.responses import HTMLResponse, Response
from servicekit.errors import ServiceError
from servicekit.web.pages import Pages, PagesDep, PageSessionDep, page_router
from servicekit.web.params import DbId

from scraper_manager.dashboard.forms import parse_selectors
from scraper_manager.dashboard.routes.common import PREFIX, EditableScraper, redirected
from scraper_manager.dashboard.selector_preview import (
    PREVIEW_ITEMS as SELECTOR_PREVIEW_ITEMS,
)
from scraper_manager.dashboard.selector_preview import (
    NoStartPage,
    StartPages,
    extract_preview,
)
from scraper_manager.models import Scraper
from scraper_manager.scrapers.dependencies import ScraperServiceDep
from scraper_manager.scrapers.schemas import ScraperPatch
from scraper_manager.settings import SettingsDep


async def get_start_pages(request: Request) -> StartPages:
    """The app's cache of fetched start pages (`install_dashboard` makes it)."""
    start_pages: StartPages = request.app.state.start_pages
    return start_pages


StartPagesDep = Annotated[StartPages, Depends(get_start_pages)]

router = page_router()


@router.get("/scrapers/{scraper_id}/selectors")
async def selector_editor(
    request: Request,
    pages: PagesDep,
    scraper: EditableScraper,
) -> HTMLResponse:
    selectors = "\n".join(f"{k}: {v}" for k, v in scraper.selectors.items())
    return _editor(pages, request, scraper, scraper.item_selector or "", selectors)


@router.get("/scrapers/{scraper_id}/selectors/preview")
async def selector_preview(
    request: Request,
    pages: PagesDep,
    scraper: EditableScraper,
    settings: SettingsDep,
    start_pages: StartPagesDep,
    item_selector: Annotated[str, Query(max_length=500)] = "",
    selectors: Annotated[str, Query(max_length=10_000)] = "",
    fetch: Annotated[str, Query(max_length=10)] = "",
) -> HTMLResponse:
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


@router.post("/scrapers/{scraper_id}/selectors")
async def save_selectors(
    scraper_id: DbId,
    request: Request,
    pages: PagesDep,
    user: PageSessionDep,
    service: ScraperServiceDep,
    scraper: EditableScraper,
    item_selector: Annotated[str, Form(max_length=500)] = "",
    selectors: Annotated[str, Form(max_length=10_000)] = "",
) -> Response:
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
            return redirected(pages, f"{PREFIX}/scrapers/{scraper_id}", "Selectors saved.")
    return _editor(pages, request, scraper, item_selector, selectors, error, status_code=422)


def _editor(
    pages: Pages,
    request: Request,
    scraper: Scraper,
    item_selector: str,
    selectors: str,
    error: str | None = None,
    *,
    status_code: int = 200,
) -> HTMLResponse:
    """The editor, its selectors as typed (or as saved) and what is wrong with them."""
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
        status_code=status_code,
    )
