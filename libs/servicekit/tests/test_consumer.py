from __future__ import annotations

import uuid
from collections.abc import Sequence

from nats.js import JetStreamContext
from servicekit.db.engine import create_session_factory
from servicekit.events import CloudEvent
from servicekit.events.consumer import EventConsumer, EventFeed
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlmodel.ext.asyncio.session import AsyncSession

from tests.factories import unique_event_type


class Recorder:
    def __init__(self, failures: int = 0) -> None:
        self.seen: list[uuid.UUID] = []
        self.failures = failures

    async def __call__(self, session: AsyncSession, events: Sequence[CloudEvent]) -> None:
        if self.failures:
            self.failures -= 1
            raise RuntimeError("handler failed")
        self.seen.extend(event.id for event in events)


def consumer_for(
    js: JetStreamContext, engine: AsyncEngine, event_type: str, handler: Recorder
) -> EventConsumer:
    feed = EventFeed(
        js,
        durable=f"test-{uuid.uuid4().hex[:8]}",
        subject=f"events.{event_type}",
        fetch_timeout=0.5,
    )
    return EventConsumer(feed, create_session_factory(engine), handler=handler, nak_delay=0.1)


async def publish(js: JetStreamContext, event: CloudEvent, msg_id: str | None = None) -> None:
    await js.publish(
        event.subject, event.to_json(), headers={"Nats-Msg-Id": msg_id or str(event.id)}
    )


async def drain(consumer: EventConsumer, rounds: int = 5) -> None:
    for _ in range(rounds):
        await consumer.poll_once()


async def test_consumer_hands_each_event_to_the_handler_once(
    js: JetStreamContext, db_engine: AsyncEngine
) -> None:
    event_type = unique_event_type()
    handler = Recorder()
    consumer = consumer_for(js, db_engine, event_type, handler)
    await consumer.subscribe()
    events = [CloudEvent(source="test", type=event_type, data={"n": n}) for n in range(5)]
    for event in events:
        await publish(js, event)
    await drain(consumer)
    assert handler.seen == [event.id for event in events]


async def test_consumer_skips_an_event_id_it_has_already_processed(
    js: JetStreamContext, db_engine: AsyncEngine
) -> None:
    event_type = unique_event_type()
    handler = Recorder()
    consumer = consumer_for(js, db_engine, event_type, handler)
    await consumer.subscribe()
    event = CloudEvent(source="test", type=event_type, data={})
    await publish(js, event)
    # The same event again under another message id, past JetStream's duplicate window.
    await publish(js, event, msg_id=f"{event.id}-again")
    await drain(consumer)
    assert handler.seen == [event.id]


async def test_failed_batch_is_redelivered_and_then_processed(
    js: JetStreamContext, db_engine: AsyncEngine
) -> None:
    event_type = unique_event_type()
    handler = Recorder(failures=1)
    consumer = consumer_for(js, db_engine, event_type, handler)
    await consumer.subscribe()
    event = CloudEvent(source="test", type=event_type, data={})
    await publish(js, event)
    await drain(consumer, rounds=8)
    assert handler.seen == [event.id]


async def test_malformed_message_is_dropped_without_blocking_the_rest(
    js: JetStreamContext, db_engine: AsyncEngine
) -> None:
    event_type = unique_event_type()
    handler = Recorder()
    consumer = consumer_for(js, db_engine, event_type, handler)
    await consumer.subscribe()
    await js.publish(f"events.{event_type}", b"{not json")
    event = CloudEvent(source="test", type=event_type, data={})
    await publish(js, event)
    await drain(consumer)
    assert handler.seen == [event.id]
