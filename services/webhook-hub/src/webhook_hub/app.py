"""`create_app(settings)`: the webhook-hub HTTP API."""

from fastapi import APIRouter, FastAPI
from servicekit.auth.endpoints import api_keys_router
from servicekit.web.app import create_service_app
from servicekit.web.errors import FlatErrorBody, flat_error_body, render_flat_error
from servicekit.web.live import live_streams

from webhook_hub import __version__
from webhook_hub.consumers.endpoints import router as consumers_router
from webhook_hub.deliveries.endpoints import router as deliveries_router
from webhook_hub.deliveries.live import LIVE_SUBJECT
from webhook_hub.event_types.endpoints import router as event_types_router
from webhook_hub.events import registry
from webhook_hub.portal.endpoints import router as portal_links_router
from webhook_hub.portal.pages import install_portal
from webhook_hub.producer_events.endpoints import router as producer_events_router
from webhook_hub.producer_events.group_commit import single_events
from webhook_hub.settings import Settings
from webhook_hub.subscriptions.dependencies import http_resources
from webhook_hub.subscriptions.endpoints import router as subscriptions_router

API_PREFIX = "/webhooks"


def create_app(settings: Settings) -> FastAPI:
    app = create_service_app(
        settings,
        title="webhook-hub",
        description="Webhook subscriptions and signed, retried delivery of every business event.",
        version=__version__,
        render_error=render_flat_error,
        validation_status=422,
        registry=registry,
        max_body_bytes=settings.max_request_body_bytes,
        resources=[http_resources, live_streams(LIVE_SUBJECT), single_events],
    )
    api = APIRouter(prefix=API_PREFIX)
    api.include_router(subscriptions_router)
    api.include_router(deliveries_router)
    api.include_router(event_types_router)
    api.include_router(producer_events_router)
    api.include_router(consumers_router)
    api.include_router(portal_links_router)
    api.include_router(api_keys_router(FlatErrorBody, flat_error_body))
    app.include_router(api)
    install_portal(app, settings)
    return app
