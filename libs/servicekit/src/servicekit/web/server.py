"""How a service's API is served by uvicorn, in production (`serve`) and in tests alike.

uvicorn's httptools protocol has no limit on a request's head (request line and headers): one
64 MiB header was read whole and answered 200. The protocol below counts the bytes of a head
as they arrive and, past the limit, answers 431 and closes the connection, so the rest is never
read (h11's `h11_max_incomplete_event_size` would stop reading too, but answers 400 and parses
several times slower).
"""

from __future__ import annotations

import asyncio
import json
import socket
from typing import Any

import structlog
import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

DEFAULT_MAX_HEADER_BYTES = 32 * 1024
logger = structlog.get_logger(__name__)


class HeadTooLarge(Exception):
    """Raised inside the parser's callback to stop parsing a request whose head is too large."""


def bounded_head_protocol(max_header_bytes: int) -> type[HttpToolsProtocol]:
    """uvicorn's httptools protocol refusing request heads over `max_header_bytes` with 431."""

    class BoundedHeadProtocol(HttpToolsProtocol):
        limit = max_header_bytes

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._in_head = True
            self._head_bytes = 0
            self._head_too_large = False

        def data_received(self, data: bytes) -> None:
            if self._in_head:
                self._head_bytes += len(data)
            super().data_received(data)
            # Judged after parsing: a chunk that completes a small head and carries body
            # bytes is not a large head.
            if self._in_head and self._head_bytes > self.limit and not self.transport.is_closing():
                self._refuse_head()

        def on_headers_complete(self) -> None:
            self._in_head = False
            self._head_bytes = 0
            # A head that arrived in one read is only complete here: measure what was parsed.
            size = len(self.url) + sum(len(n) + len(v) + 4 for n, v in self.headers)
            if size > self.limit:
                self._head_too_large = True
                # The parser turns this into an error uvicorn answers with `send_400_response`.
                raise HeadTooLarge(size)
            super().on_headers_complete()

        def send_400_response(self, msg: str) -> None:
            if self._head_too_large:
                self._refuse_head()
                return
            super().send_400_response(msg)

        def on_message_complete(self) -> None:
            super().on_message_complete()
            # The next request on this connection starts its own head.
            self._in_head = True
            self._head_bytes = 0

        def _refuse_head(self) -> None:
            if self.transport.is_closing():
                return
            body = json.dumps(
                {
                    "error": f"Request headers larger than {self.limit} bytes",
                    "code": "request_header_fields_too_large",
                }
            ).encode()
            head = [b"HTTP/1.1 431 Request Header Fields Too Large\r\n"]
            head += [
                name + b": " + value + b"\r\n" for name, value in self.server_state.default_headers
            ]
            head += [
                b"content-type: application/json\r\n",
                b"content-length: " + str(len(body)).encode() + b"\r\n",
                b"connection: close\r\n\r\n",
            ]
            self.transport.write(b"".join(head) + body)
            self.transport.close()

    return BoundedHeadProtocol


def uvicorn_config(
    app: Any,
    *,
    host: str,
    port: int,
    max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES,
    **kwargs: Any,
) -> uvicorn.Config:
    """The uvicorn configuration every service's API runs with."""
    return uvicorn.Config(
        app, host=host, port=port, http=bounded_head_protocol(max_header_bytes), **kwargs
    )


class Server(uvicorn.Server):
    """uvicorn's server, telling the app when shutdown begins.

    uvicorn closes every open connection before the lifespan's shutdown runs (WebSockets with
    1012), so an app that ends its long-lived connections its own way (commerce-content's
    GraphQL sockets with 1001, "going away") lists async callables in
    `app.state.before_shutdown`; they run first, each at most `BEFORE_SHUTDOWN_SECONDS`.
    """

    def __init__(self, config: uvicorn.Config, app: Any) -> None:
        super().__init__(config)
        self._app = app

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        state = getattr(self._app, "state", None)
        for hook in getattr(state, "before_shutdown", ()):
            try:
                await asyncio.wait_for(hook(), BEFORE_SHUTDOWN_SECONDS)
            except Exception as exc:
                logger.warning("a before-shutdown hook failed", error=repr(exc))
        await super().shutdown(sockets)


BEFORE_SHUTDOWN_SECONDS = 5.0
