"""`webhook-hub worker`: the outbox relay, dispatch and delivery, event-type sync, mail, the
NATS request/reply service for other services, the retention of mail and portal links, and
the delivery log's partitions (made ahead, dropped past their retention) and rollup."""

from __future__ import annotations

import asyncio

from servicekit.auth.page_sessions import session_cleanup_loop
from servicekit.events import RawCloudEvent
from servicekit.events.consumer import EventFeed
from servicekit.live import LiveAnnouncer
from servicekit.mail_outbox import mail_loop
from servicekit.retention import link_retention_loop, mail_retention_loop
from servicekit.runtime import ServiceRuntime
from servicekit.worker import WorkerLoop, run_worker

from webhook_hub.deliveries.live import LIVE_SUBJECT
from webhook_hub.delivery_engine.endpoint_policy import EndpointGuard
from webhook_hub.delivery_engine.engine import DeliveryEngine
from webhook_hub.delivery_engine.maintenance import delivery_log_loop, rollup_retention_loop
from webhook_hub.delivery_engine.sender import WebhookSender
from webhook_hub.delivery_engine.store import DeliveryStore
from webhook_hub.dispatch.expression_tally import expression_tally_loop
from webhook_hub.dispatch.handler import LOOP as DISPATCH_LOOP
from webhook_hub.dispatch.handler import Dispatcher
from webhook_hub.dispatch.loop import (
    DISPATCH_CONSUMER,
    FETCH_INTERVAL_SECONDS,
    DispatchLoop,
)
from webhook_hub.event_types.sync import event_type_sync_loop
from webhook_hub.events import registry
from webhook_hub.models import PortalLink, PortalSession
from webhook_hub.nats_service.handlers import subscription_requests_loop
from webhook_hub.producer_events.pruning import idempotency_pruning_loop
from webhook_hub.settings import Settings


def delivery_sender(settings: Settings) -> WebhookSender:
    """The sender of deliveries as the settings say. Raises OSError (ssl.SSLError among them)
    for a `DELIVERY_CA_FILE` that cannot be read or holds no certificate: the worker does not
    start rather than fail every delivery to the endpoints that need it."""
    # In every environment: development's policy still refuses metadata and link-local.
    guard = EndpointGuard(settings.allowed_networks, strict=settings.ssrf_guard_enabled)
    return WebhookSender(
        user_agent=settings.user_agent,
        response_body_limit=settings.response_body_limit,
        guard=guard,
        connect_timeout_seconds=settings.delivery_connect_timeout_seconds,
        root_certificates_pem=settings.delivery_ca_certificates(),
        pool_size_per_endpoint=settings.per_subscription_concurrency,
    )


def delivery_pipeline(settings: Settings) -> WorkerLoop:
    """Dispatch and delivery in one loop: dispatch hands new events' deliveries to the engine."""

    async def run(runtime: ServiceRuntime, stop: asyncio.Event) -> None:
        sender = delivery_sender(settings)
        # The one store of deliveries, shared by dispatch (its reads) and the engine.
        store = DeliveryStore(runtime.session_factory, settings)
        try:
            live = LiveAnnouncer(runtime.nats, LIVE_SUBJECT)
            jetstream = runtime.nats.client.jetstream()

            async def watermark() -> int:
                """The dispatch consumer's ack floor: every event up to it is acknowledged,
                so all its deliveries are stored (README "Ordered delivery by key")."""
                info = await jetstream.consumer_info(settings.events_stream, DISPATCH_CONSUMER)
                return info.ack_floor.stream_seq if info.ack_floor is not None else 0

            engine = DeliveryEngine(store, settings, sender, live.changed, watermark)
            feed = EventFeed(
                runtime.nats.client,
                decode=RawCloudEvent.from_json,
                durable=DISPATCH_CONSUMER,
                stream=settings.events_stream,
                batch_size=settings.dispatch_batch_size,
                ack_wait=settings.dispatch_ack_wait_seconds,
                min_fetch_interval=FETCH_INTERVAL_SECONDS,
            )
            dispatch = DispatchLoop(feed, store, Dispatcher(settings), engine)
            runtime.progress.beat(DISPATCH_LOOP)
            await asyncio.gather(
                engine.run(stop, runtime.progress.beat),
                dispatch.run(stop, lambda wait: runtime.progress.beat(DISPATCH_LOOP, wait)),
            )
        finally:
            await sender.close()
            await store.close()

    return run


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
            session_cleanup_loop(PortalSession, settings.session_cleanup_seconds),
            mail_retention_loop(settings),
            link_retention_loop(PortalLink, settings, settings.link_retention_hours),
            idempotency_pruning_loop(settings),
            delivery_log_loop(settings),
            rollup_retention_loop(settings),
            expression_tally_loop(settings.expression_tally_seconds),
        ],
        stop=stop,
    )
