"""`create_app(settings)`: the scraper-manager HTTP API."""

from fastapi import FastAPI
from servicekit.auth.endpoints import api_keys_router
from servicekit.web.app import create_service_app
from servicekit.web.errors import FlatErrorBody, flat_error_body, render_flat_error
from servicekit.web.live import live_streams

from scraper_manager import __version__
from scraper_manager.dashboard.api import router as dashboard_links_router
from scraper_manager.dashboard.pages import install_dashboard
from scraper_manager.events import registry
from scraper_manager.oauth.endpoints import router as oauth_router
from scraper_manager.oauth.tokens import TokenVerifier
from scraper_manager.runlog.endpoints import router as runlog_router
from scraper_manager.runs.endpoints import router as runs_router
from scraper_manager.runs.live import LIVE_SUBJECT
from scraper_manager.scrapers.endpoints import router as scrapers_router
from scraper_manager.settings import Settings
from scraper_manager.webhooks.endpoints import router as webhooks_router

API_PREFIX = "/api/v1"


def create_app(settings: Settings) -> FastAPI:
    app = create_service_app(
        settings,
        title="scraper-manager",
        description="Register, schedule, run, stop and monitor scrapers.",
        version=__version__,
        render_error=render_flat_error,
        validation_status=422,
        registry=registry,
        resources=[live_streams(LIVE_SUBJECT)],
    )
    app.include_router(api_keys_router(FlatErrorBody, flat_error_body), prefix=API_PREFIX)
    app.include_router(scrapers_router, prefix=API_PREFIX)
    app.include_router(runs_router, prefix=API_PREFIX)
    app.include_router(runlog_router, prefix=API_PREFIX)
    app.include_router(webhooks_router, prefix=API_PREFIX)
    app.include_router(oauth_router, prefix=API_PREFIX)
    app.include_router(dashboard_links_router, prefix=API_PREFIX)
    install_dashboard(app, settings)
    # OAuth2 access tokens (ours or an external issuer's) are accepted wherever keys are.
    app.state.bearer_verifier = TokenVerifier(settings)
    return app
