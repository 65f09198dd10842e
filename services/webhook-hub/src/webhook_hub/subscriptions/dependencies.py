"""What the subscriptions' endpoints (and the portal's) get injected: the service, and the
endpoint prober with the HTTP resources it lives on."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated

import aiohttp
from fastapi import Depends, FastAPI, Request
from servicekit.runtime import ServiceRuntime
from servicekit.web_session import SessionDep

from webhook_hub.delivery_engine.endpoint_policy import EndpointGuard
from webhook_hub.delivery_engine.http1 import tls_context
from webhook_hub.settings import Settings, SettingsDep
from webhook_hub.subscriptions.probe import EndpointProber
from webhook_hub.subscriptions.service import SubscriptionService


@asynccontextmanager
async def http_resources(app: FastAPI, runtime: ServiceRuntime) -> AsyncIterator[None]:
    settings: Settings = app.state.settings
    guard = EndpointGuard(settings.allowed_networks, strict=settings.ssrf_guard_enabled)
    # The probe connects through the guard: the address it reaches is checked after DNS, as a
    # delivery's is (a name may resolve elsewhere than when the subscription was checked).
    # It trusts what deliveries trust: an endpoint behind the operator's private CA is reachable.
    tls = tls_context(settings.delivery_ca_certificates())
    async with aiohttp.ClientSession(
        headers={"User-Agent": settings.user_agent}, connector=guard.connector(ssl=tls)
    ) as http:
        app.state.prober = EndpointProber(http, settings.probe_timeout_seconds)
        app.state.endpoint_guard = guard
        yield


# `async def`: FastAPI runs a plain `def` dependency in its thread pool, a hand-off per
# request that cost the single-event endpoint more than the dependency itself.
async def get_prober(request: Request) -> EndpointProber:
    prober: EndpointProber = request.app.state.prober
    return prober


async def get_subscription_service(
    session: SessionDep, settings: SettingsDep, request: Request
) -> SubscriptionService:
    return SubscriptionService(session, settings, request.app.state.endpoint_guard)


ProberDep = Annotated[EndpointProber, Depends(get_prober)]
SubscriptionServiceDep = Annotated[SubscriptionService, Depends(get_subscription_service)]
