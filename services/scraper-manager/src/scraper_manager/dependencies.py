"""What endpoints get injected: settings and one service per domain."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from servicekit.contracts.webhook_hub import HubSubscriptions
from servicekit.web.session import SessionDep

from scraper_manager.oauth.service import OAuthTokenService
from scraper_manager.runlog.service import RunLogService
from scraper_manager.runs.service import RunService
from scraper_manager.scrapers.service import ScraperService
from scraper_manager.settings import Settings
from scraper_manager.webhooks.service import SOURCE, WebhookService


def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


SettingsDep = Annotated[Settings, Depends(get_settings)]


def get_scraper_service(session: SessionDep, settings: SettingsDep) -> ScraperService:
    return ScraperService(session, settings)


def get_run_service(session: SessionDep, request: Request) -> RunService:
    # Exports stream after the request's session closed: they read through the factory.
    return RunService(session, request.app.state.session_factory)


def get_run_log_service(session: SessionDep, request: Request) -> RunLogService:
    return RunLogService(session, request.app.state.session_factory)


def hub_subscriptions(request: Request, settings: SettingsDep) -> HubSubscriptions:
    return HubSubscriptions(
        request.app.state.runtime.nats, source=SOURCE, timeout=settings.hub_request_timeout_seconds
    )


def get_webhook_service(request: Request, settings: SettingsDep) -> WebhookService:
    return WebhookService(request.app.state.session_factory, hub_subscriptions(request, settings))


def get_oauth_token_service(session: SessionDep, settings: SettingsDep) -> OAuthTokenService:
    return OAuthTokenService(session, settings)


ScraperServiceDep = Annotated[ScraperService, Depends(get_scraper_service)]
RunServiceDep = Annotated[RunService, Depends(get_run_service)]
RunLogServiceDep = Annotated[RunLogService, Depends(get_run_log_service)]
WebhookServiceDep = Annotated[WebhookService, Depends(get_webhook_service)]
OAuthTokenServiceDep = Annotated[OAuthTokenService, Depends(get_oauth_token_service)]
