"""What the dashboard's page modules share: the prefix, the level check, a run's duration, the
answers of a refused action, and the total readers of the lists' filters and of cells."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from fastapi.responses import HTMLResponse, RedirectResponse, Response
from servicekit.auth import AccessLevel
from servicekit.errors import Forbidden
from servicekit.web.pages import Pages, PageSession

from scraper_manager.models import LogLevel, Run, ScraperStatus

PREFIX = "/dashboard"


def require(session: PageSession, level: AccessLevel) -> None:
    if not session.can(level):
        raise Forbidden(f"This needs a {level.value} session")


def duration(run: Run) -> float | None:
    if run.started_at is None:
        return None
    end = run.finished_at or datetime.now(UTC)
    return round((end - run.started_at).total_seconds(), 1)


def refused(pages: Pages, target: str, message: str) -> Response:
    """A 409 of the service, told on the page it redirects to."""
    response = RedirectResponse(target, status_code=303)
    pages.flash(response, message, "error")
    return response


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
