"""What a running process holds: database engine, session factory and the NATS connection."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import structlog
from nats.aio.client import Client as NatsClient
from nats.js import JetStreamContext
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession

from servicekit.db.engine import create_engine, create_session_factory
from servicekit.errors import ServiceUnavailable
from servicekit.events.nats_adapter import connect_nats
from servicekit.events.registry import EventTypeRegistry, publish_event_types
from servicekit.events.stream import ensure_events_stream, require_events_stream
from servicekit.loops import LoopProgress
from servicekit.settings import ServiceSettings

logger = structlog.get_logger(__name__)


def nats_options(settings: ServiceSettings) -> dict[str, Any]:
    """How every process connects (nats-py's `connect` options): to each server `NATS_URL`
    lists, in a random order (clients spread over a cluster's nodes), reconnecting forever,
    each server tried again at most every half second. nats-py also adds the servers a
    cluster announces (INFO `connect_urls`), so a client given one node still finds the
    others once connected; listing them all lets it start while that one node is down."""
    return {
        "servers": settings.nats_servers,
        "name": type(settings).service_name,
        "connect_timeout": 2,
        "allow_reconnect": True,
        "max_reconnect_attempts": -1,
        "reconnect_time_wait": 0.5,
    }


class NatsConnection:
    """Connects in the background and keeps reconnecting, so a process starts while NATS is
    down and `/readyz` says so; on every (re)connect the stream and event types are ensured."""

    def __init__(self, settings: ServiceSettings, registry: EventTypeRegistry | None) -> None:
        self._settings = settings
        self._registry = registry
        self._client: NatsClient | None = None
        self._ready = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._connect_forever())

    async def _connect_forever(self) -> None:
        delay = 0.2
        while True:
            try:
                client = await connect_nats(
                    **nats_options(self._settings),
                    error_cb=self._on_error,
                    disconnected_cb=self._on_disconnected,
                    reconnected_cb=self._on_reconnected,
                )
                js = client.jetstream()
                if self._settings.manage_events_stream:
                    await ensure_events_stream(js, self._settings)
                else:
                    await require_events_stream(js, self._settings)
                if self._registry is not None:
                    await publish_event_types(js, self._registry)
                self._client = client
                self._ready.set()
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                logger.info(
                    "waiting for NATS", servers=self._settings.nats_servers, error=repr(exc)
                )
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    # One line each, where nats-py's own error callback logged a traceback per attempt.
    async def _on_error(self, exc: Exception) -> None:
        logger.warning("NATS connection error", error=repr(exc))

    async def _on_disconnected(self) -> None:
        if self._client is not None and self._client.is_closed:
            return  # closed on purpose: the process stops
        logger.warning("NATS disconnected; reconnecting", servers=self._settings.nats_servers)

    async def _on_reconnected(self) -> None:
        url = None if self._client is None else self._client.connected_url
        logger.info("NATS reconnected", server=None if url is None else url.netloc)

    async def wait_ready(self, timeout: float | None = None) -> None:
        await asyncio.wait_for(self._ready.wait(), timeout)

    @property
    def is_connected(self) -> bool:
        return self._client is not None and self._client.is_connected

    @property
    def client(self) -> NatsClient:
        if self._client is None:
            raise ServiceUnavailable("The event bus is not reachable yet")
        return self._client

    @property
    def js(self) -> JetStreamContext:
        return self.client.jetstream()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._client is not None:
            # flush + close, not drain: draining waits on pull subscriptions for its full
            # timeout, and everything we publish is acknowledged (JetStream) already.
            with contextlib.suppress(Exception):
                await self._client.flush(timeout=2)
            with contextlib.suppress(Exception):
                await self._client.close()


@dataclass
class ServiceRuntime:
    settings: ServiceSettings
    engine: AsyncEngine
    session_factory: async_sessionmaker[AsyncSession]
    nats: NatsConnection
    extras: dict[str, object] = field(default_factory=dict)
    # The worker's loops report here; its `/readyz` names one that stopped making progress.
    progress: LoopProgress = field(default_factory=LoopProgress)

    @classmethod
    def open(
        cls, settings: ServiceSettings, registry: EventTypeRegistry | None = None
    ) -> ServiceRuntime:
        engine = create_engine(settings)
        connection = NatsConnection(settings, registry)
        connection.start()
        return cls(settings, engine, create_session_factory(engine), connection)

    async def database_reachable(self, timeout: float = 2.0) -> bool:
        try:
            async with asyncio.timeout(timeout), self.engine.connect() as conn:
                await conn.execute(text("SELECT 1"))
        except Exception:
            return False
        return True

    async def close(self) -> None:
        await self.nats.close()
        await self.engine.dispose()


# A long-running loop of a worker process: given the runtime and the stop signal.
WorkerLoop = Callable[[ServiceRuntime, asyncio.Event], Coroutine[Any, Any, None]]
