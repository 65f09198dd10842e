"""`create_app(settings)`: the commerce-content HTTP API."""

from fastapi import FastAPI
from servicekit.auth.endpoints import api_keys_router
from servicekit.web.app import create_service_app

from commerce_content import __version__
from commerce_content.admin_action.endpoints import router as admin_action_router
from commerce_content.articles.endpoints import router as articles_router
from commerce_content.contact.endpoints import router as contact_router
from commerce_content.content_api.endpoints import router as content_router
from commerce_content.cors.middleware import ApiCorsMiddleware
from commerce_content.errors import ResourceErrorBody, render_error, resource_body
from commerce_content.events import registry
from commerce_content.graphql_api.directives import field_rate_limiter
from commerce_content.graphql_api.endpoint import router as graphql_router
from commerce_content.graphql_api.persisted import PersistedQueryStore
from commerce_content.graphql_api.schema import build_schema
from commerce_content.graphql_api.websocket import SubscriptionServer, subscriptions_resource
from commerce_content.graphql_api.websocket import router as graphql_ws_router
from commerce_content.orders.endpoints import router as orders_router
from commerce_content.orders.sandbox import sandbox_router
from commerce_content.payments.provider import sandbox_enabled
from commerce_content.products.endpoints import router as products_router
from commerce_content.rate_limit.limiter import RequestLimiter
from commerce_content.search.endpoints import router as search_router
from commerce_content.settings import Settings

API_PREFIX = "/api/v1"


def create_app(settings: Settings) -> FastAPI:
    app = create_service_app(
        settings,
        title="commerce-content",
        description=(
            "Resource API, checkout and payments, search, contact, admin action, "
            "product content API and GraphQL."
        ),
        version=__version__,
        render_error=render_error,
        validation_status=400,
        registry=registry,
        resources=[subscriptions_resource],
    )
    app.add_middleware(ApiCorsMiddleware, origin=settings.frontend_origin)
    app.state.request_limiter = RequestLimiter(settings.rate_limit, settings.rate_limit_storage_url)
    app.include_router(api_keys_router(ResourceErrorBody, resource_body), prefix=API_PREFIX)
    app.include_router(articles_router, prefix=API_PREFIX)
    app.include_router(products_router, prefix=API_PREFIX)
    app.include_router(orders_router, prefix="/api")
    if sandbox_enabled(settings):
        # Its page pays without a payment: never part of a production app.
        app.include_router(sandbox_router, prefix="/api")
    app.include_router(content_router, prefix="/api")
    app.include_router(search_router, prefix="/api")
    app.include_router(contact_router, prefix="/api")
    app.include_router(admin_action_router, prefix="/api")
    app.state.graphql_schema = build_schema(settings)
    app.state.graphql_field_limiter = field_rate_limiter(settings.rate_limit_storage_url)
    app.state.persisted_queries = PersistedQueryStore()
    app.include_router(graphql_router)
    app.state.graphql_subscriptions = SubscriptionServer(settings)
    # Before uvicorn closes open connections itself (1012): ours go with 1001.
    app.state.before_shutdown = [app.state.graphql_subscriptions.close_all]
    app.include_router(graphql_ws_router)
    return app
