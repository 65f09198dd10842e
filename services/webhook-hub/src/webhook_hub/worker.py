"""`webhook-hub worker`: the outbox relay, dispatch and delivery, event-type sync, mail, and the
NATS request/reply service for other services."""

from __future__ import annotations

import asyncio

from servicekit.mail_outbox import mail_loop
from servicekit.worker import run_worker

from webhook_hub.delivery_engine.engine import delivery_pipeline
from webhook_hub.event_types.service import event_type_sync_loop
from webhook_hub.events import registry
from webhook_hub.nats_service.handlers import subscription_requests_loop
from webhook_hub.settings import Settings


async def run(settings: Settings, stop: asyncio.Event | None = None) -> None:
    await run_worker(
        settings,
        source="webhook-hub",
        registry=registry,
        loops=[
            delivery_pipeline(settings),
            event_type_sync_loop,
            mail_loop(settings),
            subscription_requests_loop(settings),
        ],
        stop=stop,
    )
