"""CORS on `/api/` exactly as the spec says: a preflight gets 204 with the listed methods,
headers and max-age; `Access-Control-Allow-Origin` is set only for the configured origin."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

ALLOW_METHODS = b"GET, POST, PUT, DELETE, OPTIONS"
ALLOW_HEADERS = b"Content-Type, Authorization, X-API-Key"
MAX_AGE = b"86400"
PREFIX = "/api/"


class ApiCorsMiddleware:
    def __init__(self, app: ASGIApp, origin: str) -> None:
        self.app = app
        self.origin = origin.rstrip("/").encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(PREFIX):
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        origin = headers.get(b"origin")
        allowed = origin is not None and origin == self.origin
        preflight = scope["method"] == "OPTIONS" and b"access-control-request-method" in headers
        if preflight:
            response_headers = [
                (b"access-control-allow-methods", ALLOW_METHODS),
                (b"access-control-allow-headers", ALLOW_HEADERS),
                (b"access-control-max-age", MAX_AGE),
                (b"vary", b"Origin"),
                (b"content-length", b"0"),
            ]
            if allowed:
                response_headers.append((b"access-control-allow-origin", self.origin))
            await send({"type": "http.response.start", "status": 204, "headers": response_headers})
            await send({"type": "http.response.body", "body": b""})
            return

        async def send_with_cors(message: Message) -> None:
            if message["type"] == "http.response.start":
                extra = [(b"vary", b"Origin")]
                if allowed:
                    extra.append((b"access-control-allow-origin", self.origin))
                message["headers"] = [*message.get("headers", []), *extra]
            await send(message)

        await self.app(scope, receive, send_with_cors)
