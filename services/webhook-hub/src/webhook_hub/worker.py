"""`webhook-hub worker`: the outbox relay, dispatch, delivery, event-type sync, mail, and the
NATS request/reply service for other services."""

from __future__ import annotations

import asyncio

from servicekit.events.consumer import EventConsumer
from servicekit.runtime import ServiceRuntime
from servicekit.worker import WorkerLoop, run_worker

from webhook_hub.delivery_engine.engine import delivery_loop
from webhook_hub.dispatch.handler import dispatch_events
from webhook_hub.event_types.service import event_type_sync_loop
from webhook_hub.events import registry
from webhook_hub.nats_service.handlers import subscription_requests_loop
from webhook_hub.notifications.mailer import mail_loop
from webhook_hub.settings import Settings

DISPATCH_CONSUMER = "webhook-hub-dispatch"


def dispatch_loop(settings: Settings) -> WorkerLoop:
    async def run(runtime: ServiceRuntime, stop: asyncio.Event) -> None:
        consumer = EventConsumer(
            runtime.nats.js,
            runtime.session_factory,
            durable=DISPATCH_CONSUMER,
            handler=dispatch_events,
            stream=settings.events_stream,
            batch_size=settings.dispatch_batch_size,
        )
        await consumer.run(stop)

    return run


async def run(settings: Settings, stop: asyncio.Event | None = None) -> None:
    await run_worker(
        settings,
        source="webhook-hub",
        registry=registry,
        loops=[
            dispatch_loop(settings),
            delivery_loop(settings),
            event_type_sync_loop,
            mail_loop(settings),
            subscription_requests_loop(settings),
        ],
        stop=stop,
    )
