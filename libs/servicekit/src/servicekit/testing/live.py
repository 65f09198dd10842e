"""A service's app served over real HTTP for its live pages' tests: its `LiveHub`, the
connections the app takes from its pool, and the notices a worker would send."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import httpx
from fastapi import FastAPI
from sqlalchemy import event

from servicekit.live import LiveAnnouncer, LiveHub
from servicekit.testing.app import run_http_server


class LiveServer:
    def __init__(self, url: str, app: FastAPI) -> None:
        self.url = url
        self.app = app
        self.hub: LiveHub = app.state.live_hub
        self.checkouts = 0  # connections the app took from its pool

        def count(*_: object) -> None:
            self.checkouts += 1

        event.listen(app.state.runtime.engine.sync_engine.pool, "checkout", count)

    async def announce(self, subject: str, *keys: object) -> None:
        """What a worker does after a change of `keys`."""
        await LiveAnnouncer(self.app.state.runtime.nats, subject).changed(list(keys))

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.url, timeout=httpx.Timeout(30.0))


@contextlib.asynccontextmanager
async def live_server(app: FastAPI) -> AsyncIterator[LiveServer]:
    """`app` on a loopback port, once its hub follows the change notices."""
    async with run_http_server(app) as url:
        server = LiveServer(url, app)
        await asyncio.wait_for(server.hub.following.wait(), 30)
        yield server


async def until_open_streams(hub: LiveHub, count: int) -> None:
    """Until the server has seen the browsers go (a disconnect is noticed, not instant)."""
    for _ in range(300):
        if hub.open_streams == count:
            return
        await asyncio.sleep(0.05)
    assert hub.open_streams == count
