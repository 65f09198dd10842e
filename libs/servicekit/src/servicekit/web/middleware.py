"""Pure ASGI middleware (cheaper than BaseHTTPMiddleware): request ids, metrics, body size."""

from __future__ import annotations

import re
import time
import uuid
import weakref
from collections.abc import Callable
from typing import Any

import structlog
from fastapi import Request
from fastapi.responses import JSONResponse
from fastapi.routing import iter_route_contexts
from opentelemetry import trace
from prometheus_client import CollectorRegistry, Counter, Histogram
from starlette.routing import compile_path
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from servicekit.errors import PayloadTooLarge
from servicekit.web.errors import ErrorRenderer

REQUEST_ID_HEADER = b"x-request-id"
_VALID_REQUEST_ID = re.compile(rb"^[A-Za-z0-9._\-]{1,128}$")


Headers = list[tuple[bytes, bytes]]


def editing_response_headers(send: Send, edit: Callable[[Headers], None]) -> Send:
    """`send` with `edit` applied to the response's headers (in place) as they start."""

    async def send_edited(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = list(message.get("headers", []))
            edit(headers)
            message["headers"] = headers
        await send(message)

    return send_edited


class RequestIdMiddleware:
    """Take a sane `X-Request-ID` from the caller or make one; echo it and bind it to logs."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        incoming = dict(scope["headers"]).get(REQUEST_ID_HEADER, b"")
        request_id = incoming.decode() if _VALID_REQUEST_ID.match(incoming) else uuid.uuid4().hex
        scope.setdefault("state", {})["request_id"] = request_id

        send_with_id = editing_response_headers(
            send, lambda headers: headers.append((REQUEST_ID_HEADER, request_id.encode()))
        )
        span = trace.get_current_span()
        if span.is_recording():
            span.set_attribute("http.request.header.x-request-id", request_id)
        with structlog.contextvars.bound_contextvars(request_id=request_id):
            await self.app(scope, receive, send_with_id)


# Two years, subdomains included: what hstspreload.org asks of a site (without `preload`,
# which is the operator's decision for their domain).
HSTS = b"max-age=63072000; includeSubDomains"


def _add_response_security_headers(headers: Headers, hsts: bool) -> None:
    names = {name.lower() for name, _ in headers}
    if hsts and b"strict-transport-security" not in names:
        headers.append((b"strict-transport-security", HSTS))
    if b"content-disposition" in names:
        # A download (results, a run's log): never rendered as another type than it says,
        # never kept by a shared cache or the browser's (it holds the owner's data).
        if b"x-content-type-options" not in names:
            headers.append((b"x-content-type-options", b"nosniff"))
        if b"cache-control" not in names:
            headers.append((b"cache-control", b"no-store"))


class ResponseSecurityHeadersMiddleware:
    """HSTS on every response when `hsts` (production), and `nosniff` with `no-store` on every
    download (a response with `Content-Disposition`). Installed around the whole app, outside
    Starlette's ServerErrorMiddleware, so 500s carry them too (see `create_service_app`)."""

    def __init__(self, app: ASGIApp, *, hsts: bool) -> None:
        self.app = app
        self.hsts = hsts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        hsts = self.hsts
        await self.app(
            scope,
            receive,
            editing_response_headers(send, lambda h: _add_response_security_headers(h, hsts)),
        )


class HttpMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = Counter(
            "http_requests_total",
            "HTTP requests by method, route template and status",
            ["method", "route", "status"],
            registry=registry,
        )
        self.latency = Histogram(
            "http_request_duration_seconds",
            "HTTP request latency by method and route template",
            ["method", "route"],
            registry=registry,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
        )


class RouteTemplates:
    """The full template of the route a request matched, e.g. `/webhooks/subscriptions/{id}`.

    FastAPI includes routers lazily: `scope["route"]` is the route as its own router declared
    it (`/{id}` under `prefix="/subscriptions"`), without the prefixes it was included under,
    and a mounted app's route lacks the mount path. The full templates come from FastAPI's
    route contexts, indexed once per application (again when routes are added later).
    """

    def __init__(self) -> None:
        # per application: id of a route object -> the templates it is reachable under
        self._index: weakref.WeakKeyDictionary[Any, dict[int, list[tuple[re.Pattern[str], str]]]]
        self._index = weakref.WeakKeyDictionary()

    def template(self, scope: Scope) -> str:
        route = scope.get("route")
        if route is None:
            return "unmatched"
        root_path: str = scope.get("root_path", "")
        # A Mount appends its path to root_path and keeps the outer one in app_root_path.
        mount_prefix = root_path[len(scope.get("app_root_path", root_path)) :]
        path: str = scope.get("path", "")
        route_path = path[len(root_path) :] if path.startswith(root_path) else path
        candidates = self._candidates(scope.get("app"), route)
        for regex, template in candidates:
            if regex.match(route_path):
                return mount_prefix + template
        if candidates:
            return mount_prefix + candidates[0][1]
        own = getattr(route, "path_format", None) or getattr(route, "path", None)
        return mount_prefix + own if isinstance(own, str) else "unmatched"

    def _candidates(self, app: Any, route: object) -> list[tuple[re.Pattern[str], str]]:
        routes = getattr(app, "routes", None)
        if routes is None:
            return []
        index = self._index.get(app)
        if index is None or id(route) not in index:
            index = {}
            for context in iter_route_contexts(routes):
                template = context.path_format
                if isinstance(template, str):
                    regex, _, _ = compile_path(template)
                    index.setdefault(id(context.original_route), []).append((regex, template))
            self._index[app] = index
        return index.get(id(route), [])


class MetricsMiddleware:
    """Counts and times requests under their route template, never the raw path (cardinality)."""

    def __init__(self, app: ASGIApp, metrics: HttpMetrics) -> None:
        self.app = app
        self.metrics = metrics
        self.templates = RouteTemplates()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def send_recording(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_recording)
        finally:
            template = self.templates.template(scope)
            method = scope["method"]
            self.metrics.requests.labels(method, template, str(status)).inc()
            self.metrics.latency.labels(method, template).observe(time.perf_counter() - started)


class BodySizeLimitMiddleware:
    """Refuse bodies over `max_bytes` with 413 in the service's envelope.

    A declared Content-Length over the limit is refused before the endpoint runs. A streamed
    body is cut off when it passes the limit; whatever the app then answers is replaced by 413.
    """

    def __init__(self, app: ASGIApp, max_bytes: int, render: ErrorRenderer) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.render = render

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.max_bytes:
            await self._refuse(scope, send)
            return
        received = 0
        exceeded = False

        async def limited_receive() -> Message:
            nonlocal received, exceeded
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    exceeded = True
                    raise PayloadTooLarge()
            return message

        async def guarded_send(message: Message) -> None:
            if not exceeded:
                await send(message)

        await self.app(scope, limited_receive, guarded_send)
        if exceeded:
            await self._refuse(scope, send)

    async def _refuse(self, scope: Scope, send: Send) -> None:
        error = PayloadTooLarge(f"Request body larger than {self.max_bytes} bytes")
        response = JSONResponse(self.render(error, Request(scope)), status_code=413)
        await response(scope, _no_body, send)


async def _no_body() -> Message:
    return {"type": "http.request", "body": b"", "more_body": False}
