"""The FastAPI glue of `servicekit.live`: the app resource that runs a process's `LiveHub`
(following its service's change notices) and the dependency that hands it to endpoints."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated

from fastapi import Depends, FastAPI, Request

from servicekit.live import LiveHub, LiveStreamSettings
from servicekit.runtime import ServiceRuntime
from servicekit.web.app import AppResource


def live_streams(subject: str) -> AppResource:
    """The app's `LiveHub` on `app.state.live_hub`, following the notices on `subject`; at
    shutdown its streams end before the database and NATS close."""

    @asynccontextmanager
    async def resource(app: FastAPI, runtime: ServiceRuntime) -> AsyncIterator[None]:
        settings: LiveStreamSettings = app.state.settings
        hub = LiveHub(
            settings.live_stream_caps,
            concurrent_reads=settings.live_stream_reads,
            min_interval=settings.live_min_interval_seconds,
            recheck_seconds=settings.live_session_recheck_seconds,
        )
        app.state.live_hub = hub
        following = asyncio.create_task(hub.follow(runtime.nats, subject), name="live notices")
        try:
            yield
        finally:
            following.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await following
            await hub.close()

    return resource


def get_live_hub(request: Request) -> LiveHub:
    hub: LiveHub = request.app.state.live_hub
    return hub


LiveHubDep = Annotated[LiveHub, Depends(get_live_hub)]
