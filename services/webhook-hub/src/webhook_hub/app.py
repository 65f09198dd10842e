"""`create_app(settings)`: the webhook-hub HTTP API."""

from fastapi import FastAPI
from servicekit.auth.endpoints import api_keys_router
from servicekit.web.app import create_service_app

from webhook_hub import __version__
from webhook_hub.errors import ErrorBody, render_error
from webhook_hub.events import registry
from webhook_hub.settings import Settings

API_PREFIX = "/webhooks"


def create_app(settings: Settings) -> FastAPI:
    app = create_service_app(
        settings,
        title="webhook-hub",
        description="Webhook subscriptions and signed, retried delivery of every business event.",
        version=__version__,
        render_error=render_error,
        validation_status=422,
        registry=registry,
        max_body_bytes=settings.max_request_body_bytes,
    )
    app.include_router(api_keys_router(ErrorBody), prefix=API_PREFIX)
    return app
