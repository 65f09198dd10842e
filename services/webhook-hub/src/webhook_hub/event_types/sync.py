"""Keeping `event_types` in step with what the services declare in the shared KV bucket."""

from __future__ import annotations

import asyncio

import structlog
from nats.js import JetStreamContext
from servicekit.events.registry import read_event_types
from servicekit.runtime import ServiceRuntime
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession

from webhook_hub.event_types.repository import EventTypeRepository
from webhook_hub.events import registry

logger = structlog.get_logger(__name__)
SYNC_INTERVAL_SECONDS = 5.0


async def sync_event_types(
    js: JetStreamContext, session_factory: async_sessionmaker[AsyncSession]
) -> int:
    """Copy every declared type (ours, and all in the bucket) into the table."""
    documents = [definition.to_document() for definition in registry]
    documents += await read_event_types(js)
    async with session_factory() as session, session.begin():
        return await EventTypeRepository(session).upsert(documents)


async def event_type_sync_loop(runtime: ServiceRuntime, stop: asyncio.Event) -> None:
    runtime.progress.beat("event-type-sync", SYNC_INTERVAL_SECONDS)
    while not stop.is_set():
        try:
            await sync_event_types(runtime.nats.js, runtime.session_factory)
            runtime.progress.beat("event-type-sync", SYNC_INTERVAL_SECONDS)
        except Exception as exc:
            logger.warning("event type sync failed", error=repr(exc))
        try:
            await asyncio.wait_for(stop.wait(), SYNC_INTERVAL_SECONDS)
        except TimeoutError:
            continue
