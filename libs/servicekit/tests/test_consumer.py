from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Sequence

from nats.aio.client import Client as NatsClient
from nats.js import JetStreamContext
from servicekit.events import CloudEvent, RawCloudEvent
from servicekit.events.consumer import EventConsumer, EventFeed
from servicekit.events.nats_adapter import ack_all
from sqlmodel.ext.asyncio.session import AsyncSession
from structlog.testing import capture_logs

from tests.factories import Consuming, publish, unique_event_type


class Recorder:
    def __init__(self, failures: int = 0) -> None:
        self.seen: list[uuid.UUID] = []
        self.failures = failures

    async def __call__(self, session: AsyncSession, events: Sequence[CloudEvent]) -> None:
        if self.failures:
            self.failures -= 1
            raise RuntimeError("handler failed")
        self.seen.extend(event.id for event in events)


async def drain(consumer: EventConsumer, rounds: int = 5) -> None:
    for _ in range(rounds):
        await consumer.poll_once()


async def test_consumer_hands_each_event_to_the_handler_once(
    consuming: Consuming,
) -> None:
    handler = Recorder()
    consumer = await consuming.subscribed(handler)
    events = [consuming.event(n=n) for n in range(5)]
    for event in events:
        await consuming.publish(event)
    await drain(consumer)
    assert handler.seen == [event.id for event in events]


async def test_consumer_skips_an_event_id_it_has_already_processed(
    consuming: Consuming,
) -> None:
    handler = Recorder()
    consumer = await consuming.subscribed(handler)
    event = consuming.event()
    await consuming.publish(event)
    # The same event again under another message id, past JetStream's duplicate window.
    await consuming.publish(event, msg_id=f"{event.id}-again")
    await drain(consumer)
    assert handler.seen == [event.id]


async def test_failed_batch_is_redelivered_and_then_processed(
    consuming: Consuming,
) -> None:
    handler = Recorder(failures=1)
    consumer = await consuming.subscribed(handler)
    event = consuming.event()
    await consuming.publish(event)
    await drain(consumer, rounds=8)
    assert handler.seen == [event.id]


async def test_malformed_message_is_dropped_without_blocking_the_rest(
    consuming: Consuming,
) -> None:
    handler = Recorder()
    consumer = await consuming.subscribed(handler)
    await consuming.js.publish(f"events.{consuming.event_type}", b"{not json")
    event = consuming.event()
    await consuming.publish(event)
    await drain(consumer)
    assert handler.seen == [event.id]


async def test_a_feed_reading_raw_events_terminates_what_is_not_one_and_passes_data_as_sent(
    js: JetStreamContext, nats_client: NatsClient
) -> None:
    event_type = unique_event_type()
    subject = f"events.{event_type}"
    feed = EventFeed(
        nats_client,
        decode=RawCloudEvent.from_json,
        durable=f"test-{uuid.uuid4().hex[:8]}",
        subject=subject,
        fetch_timeout=0.5,
    )
    await feed.subscribe()
    envelope = CloudEvent(source="test", type=event_type, data={"n": 1}).to_json()
    not_events = [
        b"{not json",
        envelope.replace(event_type.encode(), b"Not A Type"),
        envelope.replace(b'{"n":1}', b"[1]"),  # data that is not an object
        envelope.replace(b'{"n":1}', b'{"n":"\xff"}'),  # not UTF-8
        envelope.replace(b'{"n":1}', b'{"a":' * 5000 + b"1" + b"}" * 5000),
    ]
    for data in [*not_events, envelope.replace(b'{"n":1}', b'{ "n" : 1 }')]:
        await js.publish(subject, data)
    batch = []
    for _ in range(5):
        batch += await feed.fetch()
        if batch:
            break
    assert [bytes(event.data) for _, event in batch] == [b'{ "n" : 1 }']
    await ack_all([msg for msg, _ in batch])
    await nats_client.flush()  # the server has the terminations and the acknowledgement
    info = await js.consumer_info("EVENTS", feed.durable)
    assert (info.num_pending, info.num_ack_pending, info.num_redelivered) == (0, 0, 0)


def paced_feed(client: NatsClient, event_type: str, batch_size: int = 100) -> EventFeed[CloudEvent]:
    return EventFeed(
        client,
        decode=CloudEvent.from_json,
        durable=f"test-{uuid.uuid4().hex[:8]}",
        subject=f"events.{event_type}",
        batch_size=batch_size,
        fetch_timeout=2.0,
        min_fetch_interval=1.0,
    )


async def publish_some(js: JetStreamContext, event_type: str, count: int) -> None:
    for n in range(count):
        await publish(js, CloudEvent(source="test", type=event_type, data={"n": n}))


async def test_while_events_trickle_in_a_feed_fetches_at_most_once_per_interval(
    js: JetStreamContext,
    nats_client: NatsClient,
) -> None:
    event_type = unique_event_type()
    feed = paced_feed(nats_client, event_type)
    await feed.subscribe()
    await publish_some(js, event_type, 1)
    assert len(await feed.fetch()) == 1
    started = time.monotonic()
    fetching = asyncio.ensure_future(feed.fetch())
    await asyncio.sleep(0.1)
    await publish_some(js, event_type, 3)  # come in while the feed waits out its interval
    batch = await fetching
    assert time.monotonic() - started >= 0.9  # the interval was waited out
    assert len(batch) == 3  # one batch gathered them


async def test_after_a_full_batch_a_feed_fetches_again_at_once(
    js: JetStreamContext, nats_client: NatsClient
) -> None:
    event_type = unique_event_type()
    feed = paced_feed(nats_client, event_type, batch_size=2)
    await feed.subscribe()
    await publish_some(js, event_type, 1)
    assert len(await feed.fetch()) == 1  # idle: one message
    await publish_some(js, event_type, 4)
    assert len(await feed.fetch()) == 2  # a trickle's batch, after the interval: full
    started = time.monotonic()
    assert len(await feed.fetch()) == 2  # a backlog: no pause
    assert time.monotonic() - started < 0.9  # the interval was not waited out


async def test_a_processed_batch_is_one_info_line_with_its_counts(
    consuming: Consuming,
) -> None:
    consumer = await consuming.subscribed(Recorder())
    for n in range(3):
        await consuming.publish(consuming.event(n=n))
    with capture_logs() as lines:
        await drain(consumer)
    processed = [line for line in lines if line["event"] == "event batch processed"]
    assert sum(line["events"] for line in processed) == 3
    assert sum(line["new"] for line in processed) == 3
    assert {line["log_level"] for line in processed} == {"info"}
    assert {line["consumer"] for line in processed} == {consumer.durable}


class Unreachable(Recorder):
    """Fails its first `failures` batches as a lost database connection would."""

    async def __call__(self, session: AsyncSession, events: Sequence[CloudEvent]) -> None:
        if self.failures:
            self.failures -= 1
            raise ConnectionRefusedError("database away: handler failed")
        await super().__call__(session, events)


async def test_a_batch_failed_by_an_outage_is_a_warning_naming_its_event_ids_and_the_error(
    consuming: Consuming,
) -> None:
    consumer = await consuming.subscribed(Unreachable(failures=1))
    event = consuming.event()
    await consuming.publish(event)
    with capture_logs() as lines:
        await drain(consumer)
    failed = [line for line in lines if line["event"] == "event batch failed; redelivering later"]
    assert len(failed) == 1
    assert failed[0]["log_level"] == "warning"
    assert failed[0]["event_ids"] == [str(event.id)]
    assert "handler failed" in failed[0]["error"]


class PoisonedRecorder(Recorder):
    """Raises for any batch holding an event whose data says `poison`."""

    async def __call__(self, session: AsyncSession, events: Sequence[CloudEvent]) -> None:
        if any(event.data.get("poison") for event in events):
            raise ValueError("this event cannot be handled")
        await super().__call__(session, events)


async def test_an_event_that_raises_is_set_apart_and_the_rest_of_its_batch_is_processed(
    consuming: Consuming,
) -> None:
    handler = PoisonedRecorder()
    consumer = await consuming.subscribed(handler)
    good = [consuming.event(n=n) for n in range(3)]
    poison = consuming.event(poison=True)
    for event in (good[0], poison, good[1], good[2]):
        await consuming.publish(event)
    with capture_logs() as lines:
        await drain(consumer, rounds=3)
    assert sorted(handler.seen) == sorted(event.id for event in good)
    errors = [line for line in lines if line["log_level"] == "error"]
    assert errors
    assert {(line["consumer"], line["event_id"]) for line in errors} == {
        (consumer.durable, str(poison.id))
    }


async def test_a_poison_event_is_terminated_at_its_last_delivery_not_retried_forever(
    consuming: Consuming,
) -> None:
    consumer = await consuming.subscribed(PoisonedRecorder(), nak_delay=0.05, max_deliveries=2)
    poison = consuming.event(poison=True)
    await consuming.publish(poison)
    with capture_logs() as lines:
        for _ in range(10):
            await consumer.poll_once()
            if any("given up" in line["event"] for line in lines):
                break
    given_up = [line for line in lines if "given up" in line["event"]]
    assert [(line["event_id"], line["failures"]) for line in given_up] == [(str(poison.id), 2)]
    assert await consumer.poll_once() == 0  # terminated: never handed out again


class OutagesThenOneFailure(Recorder):
    """Fails its first `outages` batches as a lost database connection would, then one as a
    bad event does, then handles them."""

    def __init__(self, outages: int) -> None:
        super().__init__()
        self.outages = outages
        self.failed = False

    async def __call__(self, session: AsyncSession, events: Sequence[CloudEvent]) -> None:
        if self.outages:
            self.outages -= 1
            raise ConnectionRefusedError("database away")
        if not self.failed:
            self.failed = True
            raise ValueError("a passing failure")
        await super().__call__(session, events)


async def test_redeliveries_after_an_outage_do_not_count_toward_giving_an_event_up(
    consuming: Consuming,
) -> None:
    handler = OutagesThenOneFailure(outages=3)
    consumer = await consuming.subscribed(handler, nak_delay=0.05, max_deliveries=2)
    event = consuming.event()
    await consuming.publish(event)
    with capture_logs() as lines:
        for _ in range(12):
            await consumer.poll_once()
            if handler.seen:
                break
    # Its fifth delivery was its first failure of its own: tried again, then handled.
    assert handler.seen == [event.id]
    assert not [line for line in lines if "given up" in line["event"]]


async def test_a_batch_failing_for_a_database_outage_comes_back_whole(
    consuming: Consuming,
) -> None:
    handler = Unreachable(failures=1)
    consumer = await consuming.subscribed(handler)
    events = [consuming.event(n=n) for n in range(2)]
    for event in events:
        await consuming.publish(event)
    with capture_logs() as lines:
        await drain(consumer, rounds=8)
    assert sorted(handler.seen) == sorted(event.id for event in events)
    assert [line for line in lines if line["log_level"] == "error"] == []
