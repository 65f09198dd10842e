"""What endpoints get injected: settings, the services, and the app's long-lived resources."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated

import aiohttp
from fastapi import Depends, FastAPI, Request
from servicekit.runtime import ServiceRuntime
from servicekit.web.session import SessionDep

from webhook_hub.settings import Settings
from webhook_hub.subscriptions.endpoint_policy import EndpointGuard
from webhook_hub.subscriptions.probe import EndpointProber
from webhook_hub.subscriptions.service import SubscriptionService


@asynccontextmanager
async def http_resources(app: FastAPI, runtime: ServiceRuntime) -> AsyncIterator[None]:
    settings: Settings = app.state.settings
    async with aiohttp.ClientSession(headers={"User-Agent": settings.user_agent}) as http:
        app.state.prober = EndpointProber(http, settings.probe_timeout_seconds)
        app.state.endpoint_guard = EndpointGuard(settings.allowed_networks)
        yield


def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def get_prober(request: Request) -> EndpointProber:
    prober: EndpointProber = request.app.state.prober
    return prober


def get_subscription_service(session: SessionDep, request: Request) -> SubscriptionService:
    return SubscriptionService(
        session, request.app.state.settings, request.app.state.endpoint_guard
    )


SettingsDep = Annotated[Settings, Depends(get_settings)]
ProberDep = Annotated[EndpointProber, Depends(get_prober)]
SubscriptionServiceDep = Annotated[SubscriptionService, Depends(get_subscription_service)]
