"""The FastAPI application every service starts from."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import Any

from fastapi import FastAPI
from prometheus_client import CollectorRegistry
from starlette.types import ASGIApp

from servicekit.auth.key_cache import ApiKeyCache
from servicekit.events.registry import EventTypeRegistry
from servicekit.runtime import ServiceRuntime
from servicekit.settings import ServiceSettings
from servicekit.tracing.setup import configure_tracing, instrument_fastapi
from servicekit.web.errors import ErrorRenderer, install_error_handlers
from servicekit.web.health import operations_router
from servicekit.web.input_guard import (
    DEFAULT_MAX_JSON_DEPTH,
    InputGuardMiddleware,
    document_input_limits,
)
from servicekit.web.logging import configure_logging
from servicekit.web.middleware import (
    BodySizeLimitMiddleware,
    HttpMetrics,
    MetricsMiddleware,
    RequestIdMiddleware,
    ResponseSecurityHeadersMiddleware,
)
from servicekit.web.pages.assets import default_catalog
from servicekit.web.pages.docs import install_api_docs
from servicekit.web.pages.security import HtmlSecurityHeadersMiddleware
from servicekit.web.pages.templating import template_environment

# Resources an app holds for its lifetime (an HTTP client pool, say): opened at startup,
# closed at shutdown, in reverse order.
AppResource = Callable[[FastAPI, ServiceRuntime], AbstractAsyncContextManager[None]]


def create_service_app(
    settings: ServiceSettings,
    *,
    title: str,
    description: str,
    version: str,
    render_error: ErrorRenderer,
    validation_status: int = 422,
    registry: EventTypeRegistry | None = None,
    max_body_bytes: int | None = None,
    max_json_depth: int = DEFAULT_MAX_JSON_DEPTH,
    resources: Sequence[AppResource] = (),
) -> FastAPI:
    """An app with the lifespan (DB engine, NATS), error envelope, health, metrics and ids.

    Nothing global: the runtime lives on `app.state`, so tests build as many apps as they like.
    """
    configure_logging(settings.log_level, json=settings.log_json)
    configure_tracing(type(settings).service_name)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        runtime = ServiceRuntime.open(settings, registry)
        app.state.runtime = runtime
        app.state.session_factory = runtime.session_factory
        try:
            async with AsyncExitStack() as stack:
                for resource in resources:
                    await stack.enter_async_context(resource(app, runtime))
                yield
        finally:
            await runtime.close()

    docs_enabled = not settings.is_production
    app = FastAPI(
        title=title,
        description=description,
        version=version,
        lifespan=lifespan,
        # Served below from the vendored assets: FastAPI's own pages load theirs from a CDN.
        docs_url=None,
        redoc_url=None,
    )
    app.state.settings = settings
    if settings.api_key_cache_seconds > 0:
        app.state.api_key_cache = ApiKeyCache(settings.api_key_cache_seconds)
    app.state.assets = default_catalog()
    app.state.page_templates = template_environment(app.state.assets)
    app.router.routes.append(app.state.assets.route())
    install_api_docs(app, redoc=docs_enabled)
    app.state.metrics_registry = CollectorRegistry()
    install_error_handlers(app, render_error, validation_status=validation_status)
    # Inside the size limit, so the guard reads bodies already bounded.
    app.add_middleware(
        InputGuardMiddleware,
        render=render_error,
        status=validation_status,
        max_json_depth=max_json_depth,
    )
    app.add_middleware(
        BodySizeLimitMiddleware,
        max_bytes=max_body_bytes or settings.max_request_body_bytes,
        render=render_error,
    )
    app.add_middleware(MetricsMiddleware, metrics=HttpMetrics(app.state.metrics_registry))
    app.add_middleware(RequestIdMiddleware)
    app.add_middleware(HtmlSecurityHeadersMiddleware)
    # Outermost, so the server span covers every middleware (and the request id is on it).
    instrument_fastapi(app)
    _wrap_whole_stack(app, hsts=settings.is_production)
    app.include_router(operations_router())
    _document_guards(
        app,
        render_error,
        validation_status=validation_status,
        max_json_depth=max_json_depth,
        max_body_bytes=max_body_bytes or settings.max_request_body_bytes,
    )
    return app


def _wrap_whole_stack(app: FastAPI, *, hsts: bool) -> None:
    """`ResponseSecurityHeadersMiddleware` around everything, Starlette's ServerErrorMiddleware
    included: `add_middleware` puts middleware inside it, so a 500 would go without HSTS."""
    build = app.build_middleware_stack

    def build_wrapped() -> ASGIApp:
        return ResponseSecurityHeadersMiddleware(build(), hsts=hsts)

    app.build_middleware_stack = build_wrapped  # type: ignore[method-assign]


def _document_guards(
    app: FastAPI,
    render: ErrorRenderer,
    *,
    validation_status: int,
    max_json_depth: int,
    max_body_bytes: int,
) -> None:
    """The OpenAPI document also says what the middleware answers (413, the input guard)."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = document_input_limits(
                generate(),
                validation_status=validation_status,
                max_json_depth=max_json_depth,
                max_body_bytes=max_body_bytes,
                render=render,
            )
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
