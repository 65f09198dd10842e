"""Driving a service's app in tests: its lifespan, an HTTP client, and a rolled-back session."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
from asgi_lifespan import LifespanManager
from fastapi import FastAPI
from sqlmodel.ext.asyncio.session import AsyncSession
from starlette.types import ASGIApp, Receive, Scope, Send

from servicekit.web.server import DEFAULT_MAX_HEADER_BYTES
from servicekit.web_session import get_session


def use_session(app: FastAPI, session: AsyncSession) -> None:
    """Run every request in a savepoint of the test's session: a request that fails rolls back
    to the savepoint, as it would roll back its own transaction; the test's transaction is
    rolled back at the end, so tests never see each other's rows."""

    async def savepoint_session() -> AsyncIterator[AsyncSession]:
        async with session.begin_nested():
            yield session

    app.dependency_overrides[get_session] = savepoint_session


def _state_per_request(app: ASGIApp, state: dict[str, object]) -> ASGIApp:
    """Each request gets a copy of the lifespan state, as uvicorn gives it (asgi-lifespan hands
    every request the same dict, so what one request caches on `request.state`, a page
    session say, would be the next request's)."""

    async def handle(scope: Scope, receive: Receive, send: Send) -> None:
        await app({**scope, "state": dict(state)}, receive, send)

    return handle


@asynccontextmanager
async def serve_app(
    app: FastAPI, base_url: str = "http://testserver"
) -> AsyncIterator[httpx.AsyncClient]:
    """The app with its lifespan running, and an in-process HTTP client for it."""
    async with LifespanManager(app, startup_timeout=30, shutdown_timeout=30) as manager:
        # Unexpected errors must reach the client as the 500 a real server sends, not as raises.
        transport = httpx.ASGITransport(
            app=_state_per_request(app, getattr(manager, "_state", {})),
            raise_app_exceptions=False,
        )
        async with httpx.AsyncClient(transport=transport, base_url=base_url) as client:
            yield client


@asynccontextmanager
async def run_http_server(app: FastAPI, port: int | None = None) -> AsyncIterator[str]:
    """The app behind a real uvicorn server on 127.0.0.1, for flows that call back over HTTP."""
    import asyncio

    from servicekit.embedded.network import free_port
    from servicekit.web.server import Server, uvicorn_config

    settings = getattr(app.state, "settings", None)
    limit = getattr(settings, "max_request_header_bytes", DEFAULT_MAX_HEADER_BYTES)
    # The same server set-up as `serve`, so tests see what production answers.
    config = uvicorn_config(
        app,
        host="127.0.0.1",
        port=port or free_port(),
        max_header_bytes=limit,
        log_level="warning",
        lifespan="on",
    )
    server = Server(config, app)
    task = asyncio.create_task(server.serve())
    try:
        for _ in range(600):
            if server.started:
                break
            if task.done():
                task.result()
            await asyncio.sleep(0.05)
        yield f"http://127.0.0.1:{config.port}"
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 30)
