"""Recording a batch of first attempts: the delivery row is written with the outcome, once,
and holds the attempt; later attempts are rows of the attempt log."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime

from sqlalchemy import text
from sqlmodel.ext.asyncio.session import AsyncSession
from webhook_hub.delivery_engine.store import (
    ATTEMPT_COLUMNS,
    ATTEMPT_COPY_TYPES,
    DELIVERY_COLUMNS,
    DELIVERY_COPY_TYPES,
    ORDERED_DELIVERY_COLUMNS,
    ORDERED_DELIVERY_COPY_TYPES,
    ORDERED_QUEUE_COLUMNS,
    ORDERED_QUEUE_COPY_TYPES,
    DeliveryWrites,
)
from webhook_hub.settings import Settings

from tests.recording_factories import first_attempt, make_subscription, rows_of


async def test_a_first_attempt_writes_its_delivery_in_its_final_state_with_one_attempt(
    db_session: AsyncSession, service_settings: Settings
) -> None:
    subscription = await make_subscription(db_session)
    succeeded, failed = first_attempt(subscription), first_attempt(subscription, None)
    await DeliveryWrites(db_session).record_outcomes([succeeded, failed], service_settings)
    rows = await rows_of(db_session, subscription.id)
    assert sorted((status, attempts, n) for status, attempts, _, n in rows) == [
        ("pending", 1, 1),  # the failure waits for its retry
        ("succeeded", 1, 1),
    ]
    # The payload survives COPY exactly (quotes, backslashes, tabs, non-ASCII).
    assert all(payload == json.loads(succeeded.job.payload_json) for _, _, payload, _ in rows)


async def test_a_delivery_stored_before_keeps_its_row_and_gains_the_attempt(
    db_session: AsyncSession, service_settings: Settings
) -> None:
    subscription = await make_subscription(db_session)
    first = first_attempt(subscription, 500)
    await DeliveryWrites(db_session).record_outcomes([first], service_settings)
    # The same event's delivery again (republished), with a success this time.
    again = dataclasses.replace(first, status_code=200, error=None)
    await DeliveryWrites(db_session).record_outcomes(
        [again, first_attempt(subscription)], service_settings
    )
    rows = await rows_of(db_session, subscription.id)
    assert [(status, attempts, n) for status, attempts, _, n in rows] == [
        ("pending", 1, 2),  # the first row stays; the second attempt is in its log
        ("succeeded", 1, 1),  # the rest of the batch is written all the same
    ]


async def test_a_deleted_subscription_leaves_no_delivery_and_the_batch_is_still_written(
    db_session: AsyncSession, service_settings: Settings
) -> None:
    gone, kept = await make_subscription(db_session), await make_subscription(db_session)
    results = [first_attempt(gone), first_attempt(kept)]
    await db_session.delete(gone)
    await db_session.flush()
    await DeliveryWrites(db_session).record_outcomes(results, service_settings)
    assert await rows_of(db_session, gone.id) == []
    assert [(s, n) for s, _, _, n in await rows_of(db_session, kept.id)] == [("succeeded", 1)]


async def test_deliveries_set_aside_are_stored_pending_and_unattempted(
    db_session: AsyncSession, service_settings: Settings
) -> None:
    subscription = await make_subscription(db_session)
    waiting = first_attempt(subscription).job
    await DeliveryWrites(db_session).record_outcomes([], service_settings, set_aside=[waiting])
    assert [(s, a, n) for s, a, _, n in await rows_of(db_session, subscription.id)] == [
        ("pending", 0, 0)
    ]


# Binary COPY writes each value in the wire form of the type it is told; text, varchar and
# json share theirs (the text's bytes).
_WIRE_FORM = {
    "character varying": "text",
    "varchar": "text",
    "text": "text",
    "json": "text",
    "uuid": "uuid",
    "timestamp with time zone": "timestamptz",
    "timestamptz": "timestamptz",
    "integer": "int4",
    "int4": "int4",
    "bigint": "int8",
    "int8": "int8",
}


async def test_binary_copy_writes_each_column_in_its_tables_type(db_session: AsyncSession) -> None:
    connection = await db_session.connection()
    for table, columns, types in (
        ("deliveries", DELIVERY_COLUMNS, DELIVERY_COPY_TYPES),
        ("delivery_attempts", ATTEMPT_COLUMNS, ATTEMPT_COPY_TYPES),
        ("deliveries", ORDERED_DELIVERY_COLUMNS, ORDERED_DELIVERY_COPY_TYPES),
        ("ordered_pending", ORDERED_QUEUE_COLUMNS, ORDERED_QUEUE_COPY_TYPES),
    ):
        result = await connection.execute(
            text(
                "SELECT attname, format_type(atttypid, NULL) FROM pg_attribute"
                " WHERE attrelid = CAST(:table AS regclass) AND attnum > 0"
            ),
            {"table": table},
        )
        in_table = {name: _WIRE_FORM[kind] for name, kind in result}
        assert len(columns) == len(types)
        assert {c: _WIRE_FORM[t] for c, t in zip(columns, types, strict=True)} == {
            c: in_table[c] for c in columns
        }


async def test_every_recorded_value_reads_back_as_it_was_and_a_time_without_offset_is_utc(
    db_session: AsyncSession, service_settings: Settings
) -> None:
    subscription = await make_subscription(db_session)
    result = first_attempt(subscription, 503)
    result.job.event_time = datetime(2026, 11, 26, 10, 30, 15, 123456)  # no offset
    result.job.traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    result.response_body = "busy: ünïcode"
    await DeliveryWrites(db_session).record_outcomes([result], service_settings)
    connection = await db_session.connection()
    delivery = (
        await connection.execute(
            text(
                "SELECT event_id, event_type, event_time, traceparent, tracestate, status,"
                " attempts, last_attempt_at, last_status_code, created_at FROM deliveries"
                " WHERE id = :id"
            ),
            {"id": result.job.delivery_id},
        )
    ).one()
    assert tuple(delivery) == (
        result.job.event_id,
        "order.paid",
        datetime(2026, 11, 26, 10, 30, 15, 123456, tzinfo=UTC),
        result.job.traceparent,
        None,
        "pending",
        1,
        result.attempted_at,
        503,
        result.attempted_at,
    )
    attempt = (
        await connection.execute(
            text(
                "SELECT first_status_code, first_response_body, first_duration_ms, first_error"
                " FROM deliveries WHERE id = :id"
            ),
            {"id": result.job.delivery_id},
        )
    ).one()
    assert tuple(attempt) == (503, "busy: ünïcode", 3, None)


async def test_a_first_attempt_is_held_by_its_delivery_row_and_adds_no_attempt_row(
    db_session: AsyncSession, service_settings: Settings
) -> None:
    subscription = await make_subscription(db_session)
    result = first_attempt(subscription, None)
    await DeliveryWrites(db_session).record_outcomes([result], service_settings)
    connection = await db_session.connection()
    logged = await connection.execute(
        text("SELECT count(*) FROM delivery_attempts WHERE delivery_id = :id"),
        {"id": result.job.delivery_id},
    )
    assert logged.scalar_one() == 0
    first = await connection.execute(
        text("SELECT first_status_code, first_error FROM deliveries WHERE id = :id"),
        {"id": result.job.delivery_id},
    )
    assert tuple(first.one()) == (None, "ConnectionRefusedError: refused")


async def test_a_retry_of_a_stored_delivery_is_a_row_of_the_attempt_log(
    db_session: AsyncSession, service_settings: Settings
) -> None:
    subscription = await make_subscription(db_session)
    first = first_attempt(subscription, 500)
    await DeliveryWrites(db_session).record_outcomes([first], service_settings)
    retry_job = dataclasses.replace(first.job.as_stored(), attempts=1)
    retry = dataclasses.replace(
        first, job=retry_job, attempted_at=datetime.now(UTC), status_code=200, duration_ms=9
    )
    await DeliveryWrites(db_session).record_outcomes([retry], service_settings)
    connection = await db_session.connection()
    logged = await connection.execute(
        text("SELECT status_code, duration_ms FROM delivery_attempts WHERE delivery_id = :id"),
        {"id": first.job.delivery_id},
    )
    assert [tuple(row) for row in logged] == [(200, 9)]
    row = await connection.execute(
        text(
            "SELECT status, attempts, first_status_code, first_duration_ms, last_status_code"
            " FROM deliveries WHERE id = :id"
        ),
        {"id": first.job.delivery_id},
    )
    # The row keeps its first attempt as it was; its state follows the retry.
    assert tuple(row.one()) == ("succeeded", 2, 500, 3, 200)


async def test_an_ordered_delivery_stored_twice_keeps_its_first_row_and_one_place_in_its_queue(
    db_session: AsyncSession, service_settings: Settings
) -> None:
    subscription = await make_subscription(db_session)
    job = first_attempt(subscription).job
    job.order_key, job.order_seq = "order-7", 41
    await DeliveryWrites(db_session).record_outcomes([], service_settings, [job])
    # The same event again (republished: another sequence), stored before the first is seen.
    again = dataclasses.replace(job, order_seq=97)
    await DeliveryWrites(db_session).record_outcomes([], service_settings, [again])
    connection = await db_session.connection()
    stored = (
        await connection.execute(
            text(
                "SELECT status, next_attempt_at, order_key, order_seq FROM deliveries"
                " WHERE subscription_id = :id AND order_key IS NOT NULL"
            ),
            {"id": subscription.id},
        )
    ).all()
    assert [tuple(row) for row in stored] == [("pending", None, "order-7", 41)]
    queued = (
        await connection.execute(
            text("SELECT order_key, order_seq FROM ordered_pending WHERE subscription_id = :id"),
            {"id": subscription.id},
        )
    ).all()
    assert [tuple(row) for row in queued] == [("order-7", 41)]
