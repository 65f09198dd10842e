"""What the dashboard's page modules share: the prefix, the level check, the scraper and run a
page is about (loaded and authorised once, as dependencies), a run's duration, the answers of a
done or refused action, a download's answer, and the total readers of the lists' filters and of
cells."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Annotated, Any
from urllib.parse import urlsplit

from fastapi import Depends
from fastapi.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse
from servicekit.auth import AccessLevel
from servicekit.errors import Forbidden
from servicekit.web.pages import Pages, PageSession, PageSessionDep
from servicekit.web.params import DbId

from scraper_manager.models import LogLevel, Run, Scraper, ScraperStatus
from scraper_manager.runs.dependencies import RunServiceDep
from scraper_manager.runs.service import Export
from scraper_manager.scrapers.dependencies import ScraperServiceDep

PREFIX = "/dashboard"


def require(session: PageSession, level: AccessLevel) -> None:
    if not session.can(level):
        raise Forbidden(f"This needs a {level.value} session")


async def own_scraper(
    user: PageSessionDep, service: ScraperServiceDep, scraper_id: DbId
) -> Scraper:
    """The scraper a page shows: the session owner's (another owner's id: 404)."""
    return await service.get(user.owner, scraper_id)


async def editable_scraper(
    user: PageSessionDep, service: ScraperServiceDep, scraper_id: DbId
) -> Scraper:
    """The scraper a page changes: the owner's (404) before the write level (403), the
    dashboard's order."""
    scraper = await service.get(user.owner, scraper_id)
    require(user, AccessLevel.WRITE)
    return scraper


OwnScraper = Annotated[Scraper, Depends(own_scraper)]
EditableScraper = Annotated[Scraper, Depends(editable_scraper)]


async def own_run(
    scraper: OwnScraper, user: PageSessionDep, runs: RunServiceDep, run_id: DbId
) -> Run:
    """The run a page shows, of the page's scraper (loaded first, as always)."""
    return await runs.get(user.owner, scraper.id, run_id)


OwnRun = Annotated[Run, Depends(own_run)]


def duration(run: Run) -> float | None:
    if run.started_at is None:
        return None
    end = run.finished_at or datetime.now(UTC)
    return round((end - run.started_at).total_seconds(), 1)


def redirected(pages: Pages, target: str, message: str, kind: str = "success") -> Response:
    """A done action's answer: to `target`, with `message` flashed there."""
    response = RedirectResponse(target, status_code=303)
    pages.flash(response, message, kind)
    return response


def refused(pages: Pages, target: str, message: str) -> Response:
    """A 409 of the service, told on the page it redirects to."""
    return redirected(pages, target, message, "error")


def attachment(export: Export) -> StreamingResponse:
    """An export as the browser saves it."""
    return StreamingResponse(
        export.body,
        media_type=export.media_type,
        headers={"Content-Disposition": f'attachment; filename="{export.filename}"'},
    )


def flash_only(pages: Pages, text: str, kind: str) -> HTMLResponse:
    return HTMLResponse(
        pages.templates.get_template("dashboard/flash.html").render(text=text, kind=kind)
    )


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


def full(value: Any) -> tuple[str, bool]:
    """A value in full, for an item's page: nested values as indented JSON (and said so)."""
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False, indent=2), True
    return cell(value), False


def cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False)
    return str(value)
