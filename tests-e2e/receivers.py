"""Webhook receivers on 127.0.0.1 that keep every request, and verify signatures with the
`standardwebhooks` package when asked what they got."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from servicekit.embedded.network import free_port
from standardwebhooks import Webhook


@dataclass(frozen=True)
class Received:
    body: bytes
    headers: dict[str, str]
    at: float

    @property
    def id(self) -> str:
        return self.headers.get("webhook-id", "")

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Receiver:
    """Answers `status` (204 by default) to every POST and records it."""

    status: int = 204
    received: list[Received] = field(default_factory=list)
    _runner: web.AppRunner | None = None
    url: str = ""

    async def start(self) -> str:
        app = web.Application(client_max_size=4 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        port = free_port()
        await web.TCPSite(self._runner, "127.0.0.1", port).start()
        self.url = f"http://127.0.0.1:{port}/hook"
        return self.url

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _handle(self, request: web.Request) -> web.Response:
        if request.method != "POST":
            return web.Response(status=200)  # the hub's HEAD probe
        body = await request.read()
        headers = {k.lower(): v for k, v in request.headers.items()}
        self.received.append(Received(body, headers, time.monotonic()))
        return web.Response(status=self.status)

    def verified(self, secret: str) -> list[dict[str, Any]]:
        """Every request, each verified with `secret` (raises if one does not verify)."""
        hook = Webhook(secret)
        return [hook.verify(r.body, r.headers) for r in self.received]

    def of_type(self, secret: str, event_type: str) -> list[dict[str, Any]]:
        return [payload for payload in self.verified(secret) if payload.get("type") == event_type]

    def ids_of_type(self, event_type: str) -> list[str]:
        return [r.id for r in self.received if r.json().get("type") == event_type]


async def eventually(
    check: Callable[[], Any], timeout: float, interval: float = 0.2, what: str = "condition"
) -> Any:
    """Polls `check` until it returns something truthy; its last value is returned."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout} s (last: {value!r})")
        await asyncio.sleep(interval)
