"""What the webhooks' endpoints get injected: the service, over the hub's NATS contract."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from servicekit.contracts.webhook_hub import HubSubscriptions

from scraper_manager.settings import SettingsDep
from scraper_manager.webhooks.service import SOURCE, WebhookService


def hub_subscriptions(request: Request, settings: SettingsDep) -> HubSubscriptions:
    return HubSubscriptions(
        request.app.state.runtime.nats, source=SOURCE, timeout=settings.hub_request_timeout_seconds
    )


def get_webhook_service(request: Request, settings: SettingsDep) -> WebhookService:
    return WebhookService(request.app.state.session_factory, hub_subscriptions(request, settings))


WebhookServiceDep = Annotated[WebhookService, Depends(get_webhook_service)]
