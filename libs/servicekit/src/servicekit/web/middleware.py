"""Pure ASGI middleware (cheaper than BaseHTTPMiddleware): request ids, metrics, body size."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable

import structlog
from fastapi import Request
from fastapi.responses import JSONResponse
from opentelemetry import trace
from prometheus_client import CollectorRegistry, Counter, Histogram
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


class MetricsMiddleware:
    """Counts and times requests under their route template, never the raw path (cardinality)."""

    def __init__(self, app: ASGIApp, metrics: HttpMetrics) -> None:
        self.app = app
        self.metrics = metrics

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
            route = scope.get("route")
            template = getattr(route, "path", None) or "unmatched"
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
