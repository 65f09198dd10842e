"""The dispatch loop: fetch events from `EVENTS` in batches and admit each one's deliveries to
the engine, which acknowledges the event once they are stored."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import structlog
from nats.aio.msg import Msg
from servicekit.events import RawCloudEvent
from servicekit.events.consumer import EventFeed, FailureCounts, refuse_message
from servicekit.loops import is_outage
from servicekit.tracing import (
    TRACEPARENT,
    TRACESTATE,
    children_follow_unsampled_parents,
    current_trace_headers,
    dispatch_span,
    sampled,
)
from servicekit.tracing import tracing_enabled as _tracing_enabled

from webhook_hub.delivery_engine.engine import DeliveryEngine
from webhook_hub.delivery_engine.jobs import DeliveryJob, EventTicket
from webhook_hub.delivery_engine.store import DeliveryStore
from webhook_hub.dispatch.handler import LOOP, Dispatcher, Matched

logger = structlog.get_logger(__name__)

DISPATCH_CONSUMER = "webhook-hub-dispatch"
# An event whose subscriptions could not be read comes back after this.
RETRY_DELAY_SECONDS = 5.0
# An event that raises on its own (a poison event) comes back after RETRY_DELAY_SECONDS,
# doubling, and is terminated at this delivery (named in an error line; still in the stream).
MAX_DELIVERIES = 5
# While events trickle in, dispatch fetches at most this often (EventFeed's
# `min_fetch_interval`): each fetch has a fixed cost (pull requests, a read, wake-ups) that
# small batches pay alone. Adds at most this much to a delivery's latency. At a fixed
# 1,000 events/s (make bench, two interleaved pairs of runs): 10 ms cost 974 and 999 µs of
# CPU per event, p50 4 ms and p99 23 ms; 20 ms cost 636 and 682 µs, p50 9 to 10 ms and p99
# 25 to 27 ms. A backlog is unaffected (full batches are fetched at once).
FETCH_INTERVAL_SECONDS = 0.02


class DispatchLoop:
    def __init__(
        self,
        feed: EventFeed[RawCloudEvent],
        store: DeliveryStore,
        dispatcher: Dispatcher,
        engine: DeliveryEngine,
    ) -> None:
        self._feed = feed
        # Dispatch's one read per fetched batch (`MATCHING`, on the store's own connection).
        self._store = store
        self._dispatcher = dispatcher
        self._engine = engine
        self._failures = FailureCounts()  # how often each event raised here
        # Decided once, as the sender does: the worker sets tracing up before building this.
        self._traced = _tracing_enabled()
        # An event whose producer did not sample its trace: under a parent-based sampler its
        # dispatch span would not be recorded, so none is made (its deliveries keep the
        # producer's context).
        self._skip_unsampled = children_follow_unsampled_parents()

    async def dispatch_once(self) -> int:
        """Fetch one batch and admit its deliveries; the number of events fetched."""
        batch = await self._feed.fetch()
        if not batch:
            return 0
        events = [event for _, event in batch]
        try:
            matched = Matched.of(await self._store.matching_existing(events))
        except Exception:
            for msg, _ in batch:
                await msg.nak(delay=RETRY_DELAY_SECONDS)
            raise
        per_event = self._dispatcher.deliveries_of(
            matched, events, lambda: [msg.metadata.sequence.stream for msg, _ in batch]
        )
        now = time.monotonic()
        failed = per_event.failed
        for position, ((msg, event), jobs) in enumerate(zip(batch, per_event, strict=True)):
            try:
                if failed and position in failed:
                    raise failed[position]
                await self._admit(msg, event, jobs, now)
            except Exception as exc:
                if is_outage(exc):
                    raise  # NATS is away: the batch comes back after its ack wait
                # This event alone: the rest of the batch goes on.
                await refuse_message(
                    msg,
                    consumer=DISPATCH_CONSUMER,
                    event_id=event.id,
                    event_type=event.type,
                    error=exc,
                    first_delay=RETRY_DELAY_SECONDS,
                    max_deliveries=MAX_DELIVERIES,
                    failures=self._failures,
                    loop=LOOP,
                )
        return len(batch)

    async def _admit(
        self, msg: Msg, event: RawCloudEvent, jobs: list[DeliveryJob], now: float
    ) -> None:
        """One event's deliveries to the engine (or its message acknowledged: none)."""
        if (
            self._traced
            and jobs
            and not (self._skip_unsampled and sampled(event.traceparent) is False)
        ):
            # The event's dispatch continues the producer's trace; its deliveries keep the
            # dispatch's context: their first attempts are its children, retries link to it.
            with dispatch_span(event) as span:
                trace = current_trace_headers()
                if span is not None:
                    span.set_attribute("webhook.deliveries", len(jobs))
            for job in jobs if trace else ():
                job.traceparent = trace[TRACEPARENT]
                job.tracestate = trace.get(TRACESTATE)
        held: list[EventTicket] = []
        fresh: list[DeliveryJob] = []
        for job in jobs:
            ticket = self._engine.ticket_of(job.delivery_id)
            if ticket is None:
                fresh.append(job)
            else:
                held.append(ticket)
        if held:
            # The event is in this worker's hands already (twice in a batch, republished,
            # or handed out again while a slow endpoint answers): anything new joins that
            # message, acknowledged when all is stored. This copy is left alone; if it
            # comes back, it finds its deliveries stored.
            self._engine.admit(held[0], fresh)
        elif fresh:
            self._engine.admit(EventTicket(msg, now), fresh)
        else:
            await msg.ack()  # nothing to deliver, or all stored before

    async def run(
        self, stop: asyncio.Event, progress: Callable[[float], None] | None = None
    ) -> None:
        """Until `stop`; `progress(wait)` after each completed iteration (servicekit.loops)."""
        while not stop.is_set():
            try:
                await self._engine.room()
                await self.dispatch_once()
                if progress is not None:
                    progress(0.0)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                logger.warning("dispatch failed; retrying", error=repr(exc))
                self._feed.reset()
                await asyncio.sleep(1.0)
