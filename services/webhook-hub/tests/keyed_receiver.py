"""A real HTTP receiver on loopback for ordered delivery: it reads each webhook's `data`
(`key`, `n`), answers what the test decides for it, and records every request in arrival
order, so a test can check that each key's events arrived in publication order."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


@dataclass(frozen=True)
class Arrival:
    key: str
    n: int
    status: int
    at: float  # monotonic, when the request arrived
    webhook_id: str


# Given (key, n, how many times this (key, n) arrived before), the status to answer.
Decide = Callable[[str, int, int], int]


@dataclass
class KeyedReceiver:
    decide: Decide = lambda _key, _n, _before: 200
    arrivals: list[Arrival] = field(default_factory=list)
    # Requests being answered now, per key: more than one means two of a key were in flight.
    in_flight: dict[str, int] = field(default_factory=dict)
    overlaps: list[str] = field(default_factory=list)
    delay: float = 0.0
    port: int = 0
    _runner: web.AppRunner | None = None
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    async def _handle(self, request: web.Request) -> web.Response:
        body: dict[str, Any] = json.loads(await request.read())
        data = body.get("data") or {}
        key, n = str(data.get("key", "")), int(data.get("n", -1))
        self.in_flight[key] = self.in_flight.get(key, 0) + 1
        if self.in_flight[key] > 1:
            self.overlaps.append(key)
        try:
            before = sum(1 for a in self.arrivals if a.key == key and a.n == n)
            status = self.decide(key, n, before)
            self.arrivals.append(
                Arrival(key, n, status, time.monotonic(), request.headers["webhook-id"])
            )
            if self.delay:
                await asyncio.sleep(self.delay)
        finally:
            self.in_flight[key] -= 1
        self._changed.set()
        return web.Response(status=status, text="ok")

    def delivered(self, key: str) -> list[int]:
        """The `n` of each event of `key` answered 2xx, in arrival order (repeats kept)."""
        return [a.n for a in self.arrivals if a.key == key and 200 <= a.status < 300]

    async def wait_until(self, done: Callable[[], bool], timeout: float = 30.0) -> None:
        async def watch() -> None:
            while not done():
                self._changed.clear()
                await self._changed.wait()

        await asyncio.wait_for(watch(), timeout)

    async def start(self) -> None:
        app = web.Application()
        app.router.add_route("POST", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = int(self._runner.addresses[0][1])

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
