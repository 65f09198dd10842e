"""What endpoints get injected: settings, the services, and the app's long-lived resources."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Annotated

import aiohttp
from fastapi import Depends, FastAPI, Request
from servicekit.runtime import ServiceRuntime
from servicekit.web.pages.links import SignInLinks
from servicekit.web.session import SessionDep

from webhook_hub.consumers.service import ConsumerService
from webhook_hub.deliveries.service import DeliveryService
from webhook_hub.delivery_engine.http1 import tls_context
from webhook_hub.event_types.service import EventTypeService
from webhook_hub.models import PortalLink
from webhook_hub.portal.service import portal_links
from webhook_hub.producer_events.service import ProducerEventService
from webhook_hub.settings import Settings
from webhook_hub.subscriptions.endpoint_policy import EndpointGuard
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


# Every dependency here is `async def`: FastAPI runs a plain `def` one in its thread pool, a
# hand-off per request that cost the single-event endpoint more than the dependency itself.
async def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


SettingsDep = Annotated[Settings, Depends(get_settings)]


async def get_prober(request: Request) -> EndpointProber:
    prober: EndpointProber = request.app.state.prober
    return prober


async def get_subscription_service(
    session: SessionDep, settings: SettingsDep, request: Request
) -> SubscriptionService:
    return SubscriptionService(session, settings, request.app.state.endpoint_guard)


async def get_delivery_service(session: SessionDep) -> DeliveryService:
    return DeliveryService(session)


async def get_event_type_service(session: SessionDep) -> EventTypeService:
    return EventTypeService(session)


async def get_producer_event_service(
    session: SessionDep, settings: SettingsDep
) -> ProducerEventService:
    return ProducerEventService(session, timedelta(hours=settings.idempotency_window_hours))


async def get_consumer_service(session: SessionDep) -> ConsumerService:
    return ConsumerService(session)


async def get_portal_link_service(session: SessionDep) -> SignInLinks[PortalLink]:
    return portal_links(session)


ProberDep = Annotated[EndpointProber, Depends(get_prober)]
SubscriptionServiceDep = Annotated[SubscriptionService, Depends(get_subscription_service)]
DeliveryServiceDep = Annotated[DeliveryService, Depends(get_delivery_service)]
EventTypeServiceDep = Annotated[EventTypeService, Depends(get_event_type_service)]
ProducerEventServiceDep = Annotated[ProducerEventService, Depends(get_producer_event_service)]
ConsumerServiceDep = Annotated[ConsumerService, Depends(get_consumer_service)]
PortalLinkServiceDep = Annotated[SignInLinks[PortalLink], Depends(get_portal_link_service)]
