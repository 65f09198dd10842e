"""Durable pull consumers: batched fetch, idempotent on the event id, ack after commit."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Generic, TypeVar

import structlog
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from sqlalchemy import text
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession

from servicekit.events.envelope import CloudEvent
from servicekit.events.nats_adapter import ack_all
from servicekit.events.pull import PullRequests
from servicekit.loops import describe, is_outage
from servicekit.tracing.spans import consume_span

logger = structlog.get_logger(__name__)

BatchHandler = Callable[[AsyncSession, Sequence[CloudEvent]], Awaitable[Any]]
EventT = TypeVar("EventT")

_MARK_PROCESSED = text(
    """
    INSERT INTO processed_events (consumer, event_id, processed_at)
    SELECT :consumer, unnest(CAST(:ids AS uuid[])), now()
    ON CONFLICT DO NOTHING
    RETURNING event_id
    """
)


class EventFeed(Generic[EventT]):
    """A durable pull consumer with explicit ack: batches of parsed events with their messages.

    `decode` reads an event from a message's data (`CloudEvent.from_json`, or
    `RawCloudEvent.from_json` for a consumer that passes the data on) and raises ValueError
    for one that is not an event. What to do with them, and when to acknowledge, is the
    caller's (see `EventConsumer`).
    """

    def __init__(
        self,
        client: NatsClient,
        *,
        decode: Callable[[bytes], EventT],
        durable: str,
        stream: str = "EVENTS",
        subject: str = "events.>",
        batch_size: int = 100,
        fetch_timeout: float = 1.0,
        ack_wait: float = 60.0,
        max_ack_pending: int = 20_000,
        min_fetch_interval: float = 0.0,
    ) -> None:
        self._client = client
        self._decode = decode
        self._busy = False
        # While events trickle in (the last batch was not full), fetches start at most this
        # often, so a batch gathers what came meanwhile: each fetch has a fixed cost (a pull
        # request, and the caller's per-batch work) that a batch of one or two pays alone.
        self._min_fetch_interval = min_fetch_interval
        self._last_fetch = 0.0
        self._last_full = False
        self.durable = durable
        self._stream = stream
        self._subject = subject
        self._batch_size = batch_size
        self._fetch_timeout = fetch_timeout
        self.ack_wait = ack_wait
        self._max_ack_pending = max_ack_pending
        self._pulls: PullRequests | None = None
        self._reset = False

    @property
    def fetch_timeout(self) -> float:
        """The longest a fetch waits for a message while idle."""
        return self._fetch_timeout

    async def subscribe(self) -> None:
        config = ConsumerConfig(
            durable_name=self.durable,
            name=self.durable,
            ack_policy=AckPolicy.EXPLICIT,
            deliver_policy=DeliverPolicy.ALL,
            ack_wait=self.ack_wait,
            max_ack_pending=self._max_ack_pending,
            filter_subject=self._subject,
        )
        # Create or update: a consumer made by an earlier version takes this one's settings.
        await self._client.jetstream().add_consumer(self._stream, config=config)
        kept = await self._close_pulls()
        pulls = PullRequests(self._client, self._stream, self.durable)
        await pulls.start(kept)
        self._pulls = pulls

    async def _close_pulls(self) -> list[Msg]:
        """Close the current pull requests; the messages they held, for the next ones."""
        pulls, self._pulls = self._pulls, None
        return [] if pulls is None else await pulls.close()

    def reset(self) -> None:
        """Subscribe afresh on the next fetch (after a connection problem)."""
        self._reset = True

    async def fetch(self) -> list[tuple[Msg, EventT]]:
        """The next batch (empty when nothing came within the fetch timeout). A message that
        is not a CloudEvent is terminated: it would never parse, and redelivering it would
        only hold up the others."""
        if self._pulls is None or self._reset:
            self._reset = False
            await self.subscribe()
        assert self._pulls is not None
        if self._busy and not self._last_full and self._min_fetch_interval > 0:
            pause = self._last_fetch + self._min_fetch_interval - time.monotonic()
            if pause > 0:
                await asyncio.sleep(pause)
        self._last_fetch = time.monotonic()
        # While events flow, take what is there at once; while idle, wait long for a single
        # message (a lingering request for a whole batch would be held until it filled).
        if self._busy:
            msgs = await self._pulls.pull(self._batch_size)
        else:
            msgs = await self._pulls.pull(1, wait=self._fetch_timeout)
        self._busy = bool(msgs)
        self._last_full = len(msgs) >= self._batch_size
        batch: list[tuple[Msg, EventT]] = []
        decode = self._decode
        for msg in msgs:
            try:
                batch.append((msg, decode(msg.data)))
            except ValueError as exc:
                logger.error(
                    "dropping malformed event",
                    consumer=self.durable,
                    subject=msg.subject,
                    stream_sequence=_sequence_of(msg),
                    error=str(exc),
                )
                await msg.term()
        return batch


def _sequence_of(msg: Msg) -> int | None:
    """A message's position in its stream, which names it for an operator."""
    try:
        return int(msg.metadata.sequence.stream)
    except Exception:  # not a JetStream message
        return None


class FailureCounts:
    """How often each event raised on its own in this process (its last `limit` events).

    Not JetStream's delivery count: that one also counts the redeliveries of an outage or a
    restart, and would give up an event at its first real failure after one. Kept in memory:
    another worker, or this one restarted, starts again from nothing, so an event is given up
    later, never sooner."""

    def __init__(self, limit: int = 10_000) -> None:
        self._limit = limit
        self._counts: OrderedDict[uuid.UUID, int] = OrderedDict()

    def add(self, event_id: uuid.UUID) -> int:
        """One more failure of `event_id`; how many it has had."""
        count = self._counts.pop(event_id, 0) + 1
        self._counts[event_id] = count
        if len(self._counts) > self._limit:
            self._counts.popitem(last=False)
        return count

    def forget(self, event_id: uuid.UUID) -> None:
        self._counts.pop(event_id, None)


async def refuse_message(
    msg: Msg,
    *,
    consumer: str,
    event_id: uuid.UUID,
    event_type: str,
    error: BaseException,
    first_delay: float,
    max_deliveries: int,
    failures: FailureCounts,
    loop: str | None = None,
) -> None:
    """An event that raised on its own (a poison event): logged at error level with its id,
    back after a delay that doubles with each failure, and terminated at its
    `max_deliveries`-th failure (it stays in the stream, named in the log) so that it is
    never retried forever."""
    failed = failures.add(event_id)
    if failed >= max_deliveries:
        failures.forget(event_id)
        logger.error(
            "event given up: it failed at every delivery; terminated",
            loop=loop or consumer,
            consumer=consumer,
            event_id=str(event_id),
            event_type=event_type,
            failures=failed,
            error=describe(error),
        )
        await msg.term()
        return
    delay = first_delay * 2 ** min(failed - 1, 16)
    logger.error(
        "event failed; redelivering later",
        loop=loop or consumer,
        consumer=consumer,
        event_id=str(event_id),
        event_type=event_type,
        failures=failed,
        retry_in_seconds=delay,
        error=describe(error),
    )
    await msg.nak(delay=delay)


class EventConsumer:
    """Runs `handler` on batches of new events inside one transaction.

    The ids of a batch are recorded in `processed_events` in that same transaction, so an
    event that JetStream redelivers after a crash, or that was published twice, is skipped.
    Messages are acknowledged only after the transaction commits.

    A batch that fails because the database or NATS is away is negatively acknowledged with a
    delay and comes back whole. One that fails otherwise is taken again event by event, each
    in its own transaction: the events that pass are acknowledged, and one that raises on its
    own (a poison event) is logged at error level with its id and comes back after a delay
    that doubles, until its `max_deliveries`-th delivery, when it is terminated (it stays in
    the stream, named in the log) instead of holding up the others forever.
    """

    def __init__(
        self,
        feed: EventFeed[CloudEvent],
        session_factory: async_sessionmaker[AsyncSession],
        *,
        handler: BatchHandler,
        nak_delay: float = 5.0,
        max_deliveries: int = 5,
    ) -> None:
        self.feed = feed
        self.durable = feed.durable
        self._session_factory = session_factory
        self._handler = handler
        self._nak_delay = nak_delay
        self._max_deliveries = max_deliveries
        self._failures = FailureCounts()

    async def subscribe(self) -> None:
        await self.feed.subscribe()

    async def poll_once(self) -> int:
        """Fetch and process one batch; the number of events handled."""
        batch = await self.feed.fetch()
        await self.process(batch)
        return len(batch)

    async def process(self, batch: Sequence[tuple[Msg, CloudEvent]]) -> None:
        if not batch:
            return
        events = [event for _, event in batch]
        with consume_span(self.durable, events):
            try:
                new_events = await self._handle(events)
            except Exception as exc:
                if is_outage(exc):
                    logger.warning(
                        "event batch failed; redelivering later",
                        consumer=self.durable,
                        event_ids=[str(event.id) for event in events],
                        error=repr(exc),
                    )
                    for msg, _ in batch:
                        await msg.nak(delay=self._nak_delay)
                    return
                if len(batch) == 1:
                    await self._refuse(*batch[0], exc)
                else:
                    await self._one_by_one(batch)
                return
            await ack_all([msg for msg, _ in batch])
            logger.info(
                "event batch processed",
                consumer=self.durable,
                events=len(events),
                new=len(new_events),
            )

    async def _handle(self, events: list[CloudEvent]) -> list[CloudEvent]:
        async with self._session_factory() as session, session.begin():
            new_events = await self._fresh(session, events)
            if new_events:
                await self._handler(session, new_events)
        return new_events

    async def _one_by_one(self, batch: Sequence[tuple[Msg, CloudEvent]]) -> None:
        """A batch that failed, not for an outage: each event in its own transaction."""
        for position, (msg, event) in enumerate(batch):
            try:
                await self._handle([event])
            except Exception as exc:
                if is_outage(exc):
                    for later, _ in batch[position:]:
                        await later.nak(delay=self._nak_delay)
                    return
                await self._refuse(msg, event, exc)
                continue
            await msg.ack()

    async def _refuse(self, msg: Msg, event: CloudEvent, exc: BaseException) -> None:
        await refuse_message(
            msg,
            consumer=self.durable,
            event_id=event.id,
            event_type=event.type,
            error=exc,
            first_delay=self._nak_delay,
            max_deliveries=self._max_deliveries,
            failures=self._failures,
        )

    async def _fresh(self, session: AsyncSession, events: list[CloudEvent]) -> list[CloudEvent]:
        """The events not seen before, each once."""
        connection = await session.connection()
        result = await connection.execute(
            _MARK_PROCESSED,
            {"consumer": self.durable, "ids": [str(event.id) for event in events]},
        )
        fresh = {row[0] for row in result}
        new_events = []
        for event in events:
            # `discard` also drops a second copy of the same id within this batch.
            if event.id in fresh:
                fresh.discard(event.id)
                new_events.append(event)
        return new_events

    async def run(
        self, stop: asyncio.Event, progress: Callable[[float], None] | None = None
    ) -> None:
        """Until `stop`; `progress(wait)` after each completed poll (servicekit.loops)."""
        while not stop.is_set():
            try:
                await self.poll_once()
                if progress is not None:
                    progress(self.feed.fetch_timeout)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                logger.warning("consumer poll failed", consumer=self.durable, error=repr(exc))
                self.feed.reset()
                await asyncio.sleep(1.0)
