"""An HTTP server on 127.0.0.1 that records every request and answers as told."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass, field

from aiohttp import web


@dataclass(frozen=True)
class ReceivedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    received_at: float = field(default_factory=time.time)


@dataclass(frozen=True)
class PlannedResponse:
    status: int = 200
    body: bytes = b"ok"
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


class HttpReceiver:
    def __init__(self, host: str = "127.0.0.1") -> None:
        self.host = host
        self.port = 0
        self.requests: list[ReceivedRequest] = []
        self.default = PlannedResponse()
        self._planned: deque[PlannedResponse] = deque()
        self._runner: web.AppRunner | None = None
        self._arrived = asyncio.Condition()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def respond_with(self, *responses: PlannedResponse | int) -> None:
        """Answer the next requests with these, in order, then with `default`."""
        for response in responses:
            self._planned.append(
                response if isinstance(response, PlannedResponse) else PlannedResponse(response)
            )

    async def _handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        record = ReceivedRequest(
            request.method,
            request.path_qs,
            {k.lower(): v for k, v in request.headers.items()},
            body,
        )
        planned = self._planned.popleft() if self._planned else self.default
        if planned.delay:
            await asyncio.sleep(planned.delay)
        async with self._arrived:
            self.requests.append(record)
            self._arrived.notify_all()
        return web.Response(status=planned.status, body=planned.body, headers=planned.headers)

    async def wait_for(self, count: int, timeout: float = 10.0) -> list[ReceivedRequest]:
        async with self._arrived:
            await asyncio.wait_for(
                self._arrived.wait_for(lambda: len(self.requests) >= count), timeout
            )
            return list(self.requests)

    async def start(self) -> None:
        app = web.Application(client_max_size=16 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, 0)
        await site.start()
        self.port = int(self._runner.addresses[0][1])

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
