from __future__ import annotations

import asyncio
import json
import uuid

import nats
import pytest
from prometheus_client import REGISTRY
from servicekit.embedded.nats import EmbeddedNats
from servicekit.events import CloudEvent, record_event
from servicekit.events.relay import OutboxRelay
from servicekit.events.stream import ensure_events_stream
from servicekit.outbox_backlog import measure_outbox_backlog
from servicekit.settings import ServiceSettings
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlmodel.ext.asyncio.session import AsyncSession
from structlog.testing import capture_logs

from tests.factories import Relaying, messages_on, relay_for, unique_event_type


async def test_committed_event_arrives_once_as_a_cloudevent_with_msg_id(
    committing_session: AsyncSession,
    relaying: Relaying,
) -> None:
    event_type = unique_event_type("order")
    async with committing_session.begin():
        event_id = await record_event(
            committing_session, event_type, {"id": 7, "total": "10.50"}, tenant="consumer-a"
        )
    await relaying.relay().publish_pending()

    messages = await relaying.messages(event_type)
    assert len(messages) == 1
    body = json.loads(messages[0].data)
    assert body["specversion"] == "1.0"
    assert body["id"] == str(event_id)
    assert body["source"] == "servicekit-tests"
    assert body["type"] == event_type
    assert body["datacontenttype"] == "application/json"
    assert body["data"] == {"id": 7, "total": "10.50"}
    assert body["tenant"] == "consumer-a"
    assert "time" in body
    assert messages[0].headers is not None
    assert messages[0].headers["Nats-Msg-Id"] == str(event_id)


async def test_recorded_events_are_numbered_in_the_order_they_were_recorded(
    committing_session: AsyncSession,
) -> None:
    event_type = unique_event_type("order")
    async with committing_session.begin():
        ids = [await record_event(committing_session, event_type, {"n": n}) for n in range(50)]
    assert {event_id.version for event_id in ids} == {7}
    assert ids == sorted(ids, key=lambda event_id: event_id.int)


def test_an_envelope_made_without_an_id_gets_a_time_ordered_one() -> None:
    first, second = (CloudEvent(source="s", type="order.paid", data={}) for _ in range(2))
    assert (first.id.version, second.id.version) == (7, 7)
    assert first.id.int < second.id.int


async def test_rolled_back_transaction_publishes_nothing(
    committing_session: AsyncSession,
    relaying: Relaying,
) -> None:
    event_type = unique_event_type()

    async def change_that_fails() -> None:
        async with committing_session.begin():
            await record_event(committing_session, event_type, {"n": 1})
            raise RuntimeError("the change failed")

    with pytest.raises(RuntimeError, match="the change failed"):
        await change_that_fails()
    await relaying.relay().publish_pending()
    assert await relaying.messages(event_type) == []


async def test_publishing_the_same_outbox_row_twice_yields_one_stream_message(
    committing_session: AsyncSession,
    relaying: Relaying,
) -> None:
    event_type = unique_event_type()
    async with committing_session.begin():
        event_id = await record_event(committing_session, event_type, {"n": 1})
    relay = relaying.relay()
    await relay.publish_pending()
    # As if the relay crashed after publishing but before marking the row sent.
    async with relaying.engine.begin() as conn:
        await conn.execute(
            text("UPDATE outbox_events SET published_at = NULL WHERE id = :id"), {"id": event_id}
        )
    assert await relay.publish_pending() >= 1
    assert len(await relaying.messages(event_type)) == 1


async def test_relay_wakes_on_commit_without_waiting_for_the_poll(
    committing_session: AsyncSession,
    relaying: Relaying,
) -> None:
    event_type = unique_event_type()
    async with relaying.listening(event_type) as sub:
        async with committing_session.begin():
            await record_event(committing_session, event_type, {"n": 1})
        msg = await sub.next_msg(timeout=5.0)
        assert json.loads(msg.data)["type"] == event_type


async def test_event_recorded_while_nats_is_down_is_published_after_it_returns(
    committing_session: AsyncSession,
    db_engine: AsyncEngine,
    restartable_nats: EmbeddedNats,
    kit_settings: ServiceSettings,
) -> None:
    client = await nats.connect(
        restartable_nats.url, max_reconnect_attempts=-1, reconnect_time_wait=0.2
    )
    js = client.jetstream()
    await ensure_events_stream(js, kit_settings)
    relay = OutboxRelay(
        db_engine,
        js,
        source="servicekit-tests",
        database_url=kit_settings.database_url,
        publish_timeout=1.0,
    )
    await relay.publish_pending()  # the shared database may hold other tests' rows
    try:
        restartable_nats.stop()
        event_type = unique_event_type()
        async with committing_session.begin():
            event_id = await record_event(committing_session, event_type, {"n": 1})
        with pytest.raises((nats.errors.Error, TimeoutError)):
            await relay.publish_pending()
        async with db_engine.connect() as conn:
            pending = await conn.scalar(
                text("SELECT published_at IS NULL FROM outbox_events WHERE id = :id"),
                {"id": event_id},
            )
        assert pending is True

        restartable_nats.start()
        for _ in range(100):
            if client.is_connected:
                break
            await asyncio.sleep(0.1)
        assert await relay.publish_pending() >= 1
        messages = await messages_on(js, f"events.{event_type}")
        assert [json.loads(m.data)["id"] for m in messages] == [str(event_id)]
    finally:
        await client.close()


async def test_record_event_refuses_a_type_not_of_the_resource_action_form(
    db_session: AsyncSession,
) -> None:
    with pytest.raises(ValueError, match="resource"):
        await record_event(db_session, "NotAType", {})


async def test_unique_ids_for_every_recorded_event(db_session: AsyncSession) -> None:
    first = await record_event(db_session, "probe.happened", {})
    second = await record_event(db_session, "probe.happened", {})
    assert isinstance(first, uuid.UUID)
    assert first != second


async def test_outbox_backlog_counts_unsent_rows_and_falls_to_zero_once_published(
    committing_session: AsyncSession,
    relaying: Relaying,
) -> None:
    relay = relaying.relay()
    await relay.publish_pending()  # rows other tests left behind
    event_type = unique_event_type("backlog")
    async with committing_session.begin():
        for n in range(3):
            await record_event(committing_session, event_type, {"n": n})

    assert await measure_outbox_backlog(relaying.engine) == 3
    assert REGISTRY.get_sample_value("outbox_backlog") == 3
    while await relay.publish_pending():
        continue
    assert await measure_outbox_backlog(relaying.engine) == 0
    assert REGISTRY.get_sample_value("outbox_backlog") == 0


async def test_a_published_batch_is_one_info_line_naming_the_source_and_count(
    committing_session: AsyncSession,
    relaying: Relaying,
) -> None:
    relay = relaying.relay()
    await relay.publish_pending()  # the shared database may hold other tests' rows
    event_type = unique_event_type()
    async with committing_session.begin():
        for n in range(2):
            await record_event(committing_session, event_type, {"n": n})
    with capture_logs() as lines:
        assert await relay.publish_pending() == 2
    assert [
        (line["event"], line["log_level"], line["source"], line["events"]) for line in lines
    ] == [("outbox batch published", "info", "servicekit-tests", 2)]


async def test_an_event_nats_refuses_is_set_aside_and_the_rest_of_its_batch_is_published(
    committing_session: AsyncSession,
    relaying: Relaying,
) -> None:
    relay = relaying.relay()
    await relay.publish_pending()  # the shared database may hold other tests' rows
    event_type = unique_event_type("poison")
    async with committing_session.begin():
        before = await record_event(committing_session, event_type, {"n": 1})
        # Past NATS's max_payload (1 MiB): no publication can ever succeed.
        poison = await record_event(committing_session, event_type, {"blob": "x" * 2_000_000})
        after = await record_event(committing_session, event_type, {"n": 2})

    with capture_logs() as lines:
        assert await relay.publish_pending() == 3
    messages = await relaying.messages(event_type, expected=2)
    assert [json.loads(m.data)["id"] for m in messages] == [str(before), str(after)]
    async with relaying.engine.connect() as conn:
        row = (
            await conn.execute(
                text(
                    "SELECT published_at, failed_at, last_error FROM outbox_events WHERE id = :id"
                ),
                {"id": poison},
            )
        ).one()
    assert row.published_at is None
    assert row.failed_at is not None
    assert "MaxPayload" in row.last_error
    errors = [line for line in lines if line["log_level"] == "error"]
    assert [(line["loop"], line["event_id"]) for line in errors] == [("outbox-relay", str(poison))]


async def test_an_event_set_aside_is_not_tried_again_and_is_counted_apart_from_the_backlog(
    committing_session: AsyncSession,
    relaying: Relaying,
) -> None:
    relay = relaying.relay()
    await relay.publish_pending()
    async with committing_session.begin():
        poison = await record_event(
            committing_session, unique_event_type("poison"), {"blob": "x" * 2_000_000}
        )
    await relay.publish_pending()

    with capture_logs() as lines:
        assert await relay.publish_pending() == 0
    assert lines == []
    assert await measure_outbox_backlog(relaying.engine) == 0
    set_aside = REGISTRY.get_sample_value("outbox_set_aside")
    assert set_aside is not None
    assert set_aside >= 1
    async with relaying.engine.connect() as conn:
        failed = await conn.scalar(
            text("SELECT failed_at IS NOT NULL FROM outbox_events WHERE id = :id"), {"id": poison}
        )
    assert failed is True


async def test_a_relay_that_cannot_publish_waits_its_backoff_out_whatever_commits_notify(
    committing_session: AsyncSession,
    db_engine: AsyncEngine,
    restartable_nats: EmbeddedNats,
    kit_settings: ServiceSettings,
) -> None:
    # A server with no EVENTS stream: every publish has no responder, refused at once (as
    # while a cluster elects the stream's leader).
    client = await nats.connect(restartable_nats.url)
    relay = relay_for(db_engine, client.jetstream(), kit_settings)
    stop = asyncio.Event()
    event_type = unique_event_type()
    try:
        with capture_logs() as logs:
            task = asyncio.create_task(relay.run(stop))
            # 40 commits, each notifying the relay, over 2 s: backing off from 0.2 s
            # (0.4, 0.8, 1.6), it tries at most 3 times meanwhile, plus one as it stops.
            for n in range(40):
                async with committing_session.begin():
                    await record_event(committing_session, event_type, {"n": n})
                await asyncio.sleep(0.05)
            stop.set()
            await asyncio.wait_for(task, 10)
    finally:
        await client.close()
    attempts = [e for e in logs if e["event"] == "outbox relay could not publish"]
    assert 1 <= len(attempts) <= 4, [e["error"] for e in attempts]
