"""Data for servicekit's tests."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig
from servicekit.db.engine import create_session_factory
from servicekit.events import CloudEvent
from servicekit.events.consumer import EventConsumer, EventFeed
from servicekit.events.relay import OutboxRelay
from servicekit.settings import ServiceSettings
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlmodel.ext.asyncio.session import AsyncSession


def unique_event_type(resource: str = "probe") -> str:
    """A type no other test publishes, so each test reads only its own subject."""
    return f"{resource}{uuid.uuid4().hex[:10]}.happened"


async def pull_consumer_on(
    js: JetStreamContext, subject: str, *, ack_wait: float | None = None, prefix: str = "test"
) -> str:
    """A durable pull consumer with explicit acknowledgement on `subject` of the EVENTS
    stream; its name."""
    durable = f"{prefix}-{uuid.uuid4().hex[:8]}"
    await js.add_consumer(
        "EVENTS",
        config=ConsumerConfig(
            durable_name=durable,
            ack_policy=AckPolicy.EXPLICIT,
            ack_wait=ack_wait,
            filter_subject=subject,
        ),
    )
    return durable


def relay_for(
    engine: AsyncEngine, js: JetStreamContext, settings: ServiceSettings, poll_seconds: float = 0.2
) -> OutboxRelay:
    return OutboxRelay(
        engine,
        js,
        source="servicekit-tests",
        database_url=settings.database_url,
        poll_seconds=poll_seconds,
    )


async def messages_on(js: JetStreamContext, subject: str, expected: int = 1) -> list[Msg]:
    """Every message on `subject`, read with an ephemeral consumer."""
    sub = await js.pull_subscribe(subject, stream="EVENTS")
    received: list[Msg] = []
    try:
        while True:
            batch = await sub.fetch(100, timeout=1.0)
            received.extend(batch)
            for msg in batch:
                await msg.ack()
    except TimeoutError:  # nats-py's own or a bare asyncio one
        pass
    finally:
        await sub.unsubscribe()
    return received


@dataclass
class Relaying:
    """The outbox's database, JetStream, and relays between them as a service runs them."""

    engine: AsyncEngine
    js: JetStreamContext
    settings: ServiceSettings

    def relay(self) -> OutboxRelay:
        return relay_for(self.engine, self.js, self.settings)

    async def messages(self, event_type: str, expected: int = 1) -> list[Msg]:
        return await messages_on(self.js, f"events.{event_type}", expected)

    @asynccontextmanager
    async def listening(self, event_type: str) -> AsyncIterator[Subscription]:
        """A relay that polls only every 30 s, running once it has drained older rows and
        LISTENs; a subscription to `event_type`'s subject."""
        stop = asyncio.Event()
        task = asyncio.create_task(relay_for(self.engine, self.js, self.settings, 30.0).run(stop))
        try:
            await asyncio.sleep(0.5)  # let it drain older rows and LISTEN
            sub = await self.js.subscribe(f"events.{event_type}", stream="EVENTS")
            yield sub
            await sub.unsubscribe()
        finally:
            stop.set()
            await asyncio.wait_for(task, 10)


Handler = Callable[[AsyncSession, Sequence[CloudEvent]], Awaitable[None]]


async def publish(js: JetStreamContext, event: CloudEvent, msg_id: str | None = None) -> None:
    await js.publish(
        event.subject, event.to_json(), headers={"Nats-Msg-Id": msg_id or str(event.id)}
    )


@dataclass
class Consuming:
    """JetStream, the test database and an event type of the test's own, for consumers of it."""

    js: JetStreamContext
    client: NatsClient
    engine: AsyncEngine
    event_type: str = field(default_factory=unique_event_type)

    def feed(self) -> EventFeed[CloudEvent]:
        return EventFeed(
            self.client,
            decode=CloudEvent.from_json,
            durable=f"test-{uuid.uuid4().hex[:8]}",
            subject=f"events.{self.event_type}",
            fetch_timeout=0.5,
        )

    async def subscribed(
        self, handler: Handler, nak_delay: float = 0.1, max_deliveries: int | None = None
    ) -> EventConsumer:
        """A consumer of the type's events for `handler`, subscribed."""
        options = {} if max_deliveries is None else {"max_deliveries": max_deliveries}
        consumer = EventConsumer(
            self.feed(),
            create_session_factory(self.engine),
            handler=handler,
            nak_delay=nak_delay,
            **options,
        )
        await consumer.subscribe()
        return consumer

    def event(self, **data: Any) -> CloudEvent:
        return CloudEvent(source="test", type=self.event_type, data=data)

    async def publish(self, event: CloudEvent, msg_id: str | None = None) -> None:
        await publish(self.js, event, msg_id)
