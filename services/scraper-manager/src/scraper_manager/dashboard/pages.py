"""The dashboard's pages: thin handlers over ScraperService, RunService and RunLogService,
authorised as the API is (the session's owner scopes every read; another owner's ids are 404;
changes need the level the API asks for).

`install_dashboard` sets the site up (its `Pages`, reached by the handlers as `PagesDep`, and
the selector editor's `StartPages` on `app.state`) and includes the page groups, each a
module-level router of `dashboard/routes/`; sign-in, sign-out and link landing are
servicekit's."""

from __future__ import annotations

from pathlib import Path
from zoneinfo import ZoneInfo

from fastapi import FastAPI
from servicekit.web.pages import NavItem, Pages
from servicekit.web.pages.sign_in import SignInPages, sign_in_router

from scraper_manager.dashboard.cron_words import describe
from scraper_manager.dashboard.links import get_dashboard_links
from scraper_manager.dashboard.live import average_rate, status_breakdown
from scraper_manager.dashboard.routes import runs, scraper, scrapers, selectors, webhooks
from scraper_manager.dashboard.routes.common import (
    PREFIX,
    duration,
    short_url,
    status_filter,
)
from scraper_manager.dashboard.selector_preview import StartPages
from scraper_manager.models import DashboardSession
from scraper_manager.settings import Settings

TONES = {
    "completed": "ok",
    "running": "info",
    "pending": "info",
    "failed": "bad",
    "stopped": "warning",
    "skipped": "neutral",
    "idle": "neutral",
}
SIGN_IN = SignInPages(
    template="dashboard/login.html",
    refused="That key is not valid.",
    destination="the dashboard",
    landing=f"{PREFIX}/",
)
# In this order: `/scrapers/new` is matched before `/scrapers/{scraper_id}`.
ROUTERS = (scrapers.router, selectors.router, scraper.router, runs.router, webhooks.router)


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
        template_dirs=[Path(__file__).parent / "templates"],
    )
    pages.templates.globals.update(
        tone=lambda status: TONES.get(str(status), "neutral"),
        zone=ZoneInfo,
        in_words=describe,
        average_rate=lambda run: average_rate(run, duration(run)),
        status_breakdown=status_breakdown,
    )
    app.state.start_pages = StartPages()
    app.include_router(sign_in_router(SIGN_IN, get_dashboard_links), prefix=PREFIX)
    for router in ROUTERS:
        app.include_router(router, prefix=PREFIX)


__all__ = ["PREFIX", "install_dashboard", "short_url", "status_filter"]
