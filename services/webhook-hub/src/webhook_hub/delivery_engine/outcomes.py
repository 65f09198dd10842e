"""Recording a batch of attempts in one transaction: the attempt log, each delivery's next
step, each subscription's consecutive-failure count, and auto-disable (the decisions are
decisions.py's and subscriptions.disabling's; this module only writes them).

An event's first attempt has no delivery row yet (its event message stands for it until
then): the row is written here, already in the state the attempt left it in and holding that
attempt (its `first_*` columns), so a delivery that succeeds at once costs one row. Later
attempts are rows of `delivery_attempts`. Deliveries set aside without an attempt (their
subscription's queue was full) are written as pending.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence, Set
from datetime import UTC, datetime
from typing import Any

import psycopg
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlmodel.ext.asyncio.session import AsyncSession

from webhook_hub.deliveries.repository import LOCK_SUBSCRIPTIONS, wake_delivery_workers
from webhook_hub.delivery_engine.decisions import (
    NextStep,
    RetryRules,
    SubscriptionTally,
    next_step,
    tally,
)
from webhook_hub.delivery_engine.jobs import AttemptResult, DeliveryJob
from webhook_hub.models import DeliveryStatus
from webhook_hub.settings import Settings
from webhook_hub.subscriptions.disabling import disable_reason, disable_subscription

# One statement per batch over arrays (unnest), not one per row: the worker's CPU, not the
# database, bounds throughput, and row-by-row executemany costs it dearly.
_INSERT_ATTEMPTS = text(
    """
    INSERT INTO delivery_attempts
        (delivery_id, attempted_at, status_code, response_body, duration_ms, error)
    SELECT a.* FROM unnest(
        CAST(:delivery_id AS uuid[]), CAST(:attempted_at AS timestamptz[]),
        CAST(:status_code AS int[]), CAST(:response_body AS text[]),
        CAST(:duration_ms AS int[]), CAST(:error AS text[])
    ) AS a(delivery_id, attempted_at, status_code, response_body, duration_ms, error)
    -- A subscription deleted while its delivery was in flight took the delivery with it.
    WHERE EXISTS (SELECT 1 FROM deliveries d WHERE d.id = a.delivery_id)
    """
)
_INSERT_DELIVERIES = text(
    """
    INSERT INTO deliveries (id, subscription_id, event_id, event_type, payload, event_time,
                            traceparent, tracestate, status, attempts, next_attempt_at, last_attempt_at,
                            last_status_code, last_error, created_at, completed_at,
                            first_status_code, first_response_body, first_duration_ms,
                            first_error)
    SELECT d.* FROM unnest(
        CAST(:id AS uuid[]), CAST(:subscription_id AS uuid[]), CAST(:event_id AS uuid[]),
        CAST(:event_type AS text[]), CAST(:payload AS json[]),
        CAST(:event_time AS timestamptz[]), CAST(:traceparent AS text[]),
        CAST(:tracestate AS text[]), CAST(:status AS text[]),
        CAST(:attempts AS int[]), CAST(:next_attempt_at AS timestamptz[]),
        CAST(:last_attempt_at AS timestamptz[]), CAST(:last_status_code AS int[]),
        CAST(:last_error AS text[]), CAST(:created_at AS timestamptz[]),
        CAST(:completed_at AS timestamptz[]), CAST(:first_status_code AS int[]),
        CAST(:first_response_body AS text[]), CAST(:first_duration_ms AS int[]),
        CAST(:first_error AS text[])
    ) AS d(id, subscription_id, event_id, event_type, payload, event_time, traceparent,
           tracestate, status, attempts,
           next_attempt_at, last_attempt_at, last_status_code, last_error, created_at,
           completed_at, first_status_code, first_response_body, first_duration_ms,
           first_error)
    -- A subscription deleted since its event was matched takes the delivery with it.
    WHERE EXISTS (SELECT 1 FROM subscriptions s WHERE s.id = d.subscription_id)
    -- The same event reached the subscription before (a republished event): keep the first.
    ON CONFLICT (subscription_id, event_id) DO NOTHING
    RETURNING id
    """
)
# Column order of the rows above, for COPY; the INSERTs' array parameters have the same names.
DELIVERY_COLUMNS = (
    "id",
    "subscription_id",
    "event_id",
    "event_type",
    "payload",
    "event_time",
    "traceparent",
    "tracestate",
    "status",
    "attempts",
    "next_attempt_at",
    "last_attempt_at",
    "last_status_code",
    "last_error",
    "created_at",
    "completed_at",
    "first_status_code",
    "first_response_body",
    "first_duration_ms",
    "first_error",
)
# Each column's type as binary COPY writes it: the table's own, but `text` for the `json`
# payload (json's binary form is its text; psycopg's json dumper would encode the str again).
# tests/test_outcomes.py checks them against the table.
DELIVERY_COPY_TYPES = (
    "uuid",
    "uuid",
    "uuid",
    "varchar",
    "text",
    "timestamptz",
    "varchar",
    "varchar",
    "varchar",
    "int4",
    "timestamptz",
    "timestamptz",
    "int4",
    "varchar",
    "timestamptz",
    "timestamptz",
    "int4",
    "text",
    "int4",
    "text",
)
# The attempt's own id is the column's default (gen_random_uuid()).
ATTEMPT_COLUMNS = (
    "delivery_id",
    "attempted_at",
    "status_code",
    "response_body",
    "duration_ms",
    "error",
)
ATTEMPT_COPY_TYPES = ("uuid", "timestamptz", "int4", "varchar", "int4", "varchar")
_UPDATE_DELIVERIES = text(
    """
    UPDATE deliveries d SET status = u.status, attempts = d.attempts + 1,
        next_attempt_at = u.next_attempt_at, lease_until = NULL,
        last_attempt_at = u.attempted_at, last_status_code = u.status_code,
        last_error = u.error, completed_at = u.completed_at
    FROM unnest(
        CAST(:ids AS uuid[]), CAST(:statuses AS text[]), CAST(:next_attempt_at AS timestamptz[]),
        CAST(:attempted_at AS timestamptz[]), CAST(:status_codes AS int[]),
        CAST(:errors AS text[]), CAST(:completed_at AS timestamptz[])
    ) AS u(id, status, next_attempt_at, attempted_at, status_code, error, completed_at)
    WHERE d.id = u.id
    """
)
_UPDATE_SUBSCRIPTION = text(
    """
    UPDATE subscriptions SET
        failure_count = CASE WHEN :reset THEN :failures ELSE failure_count + :failures END,
        last_delivery_at = COALESCE(:last_success, last_delivery_at)
    WHERE id = :id
    RETURNING id, failure_count, is_active
    """
)


def _delivery_row(job: DeliveryJob, state: tuple[Any, ...]) -> tuple[Any, ...]:
    """A new delivery row (`DELIVERY_COLUMNS`): the event's fields, then `state`, the
    columns from `status` on."""
    return (
        job.delivery_id,
        job.subscription_id,
        job.event_id,
        job.event_type,
        job.payload_json.decode(),
        # Binary COPY needs an offset; a producer's time without one is UTC (as text was).
        job.event_time if job.event_time.tzinfo else job.event_time.replace(tzinfo=UTC),
        job.traceparent,
        job.tracestate,
        *state,
    )


def _first_row(result: AttemptResult, step: NextStep) -> tuple[Any, ...]:
    """The delivery row of an event's first attempt, in the state the attempt left it and
    holding the attempt (which started when the row is created)."""
    state = (
        step.status,
        1,
        step.next_attempt_at,
        result.attempted_at,
        result.status_code,
        result.error,
        result.attempted_at,
        step.completed_at,
        result.status_code,
        result.response_body,
        result.duration_ms,
        result.error,
    )
    return _delivery_row(result.job, state)


def _pending_row(job: DeliveryJob, now: datetime) -> tuple[Any, ...]:
    """A delivery set aside before its first attempt: due now, for any worker's claim loop."""
    state = (DeliveryStatus.PENDING, 0, now, None, None, None, now, None, None, None, None, None)
    return _delivery_row(job, state)


def _attempt_row(result: AttemptResult) -> tuple[Any, ...]:
    """A row of `delivery_attempts` (`ATTEMPT_COLUMNS`)."""
    return (
        result.job.delivery_id,
        result.attempted_at,
        result.status_code,
        result.response_body,
        result.duration_ms,
        result.error,
    )


def _as_arrays(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> dict[str, list[Any]]:
    """The rows as one array per column, named as the column (the INSERTs' parameters)."""
    return {name: [row[n] for row in rows] for n, name in enumerate(columns)}


async def _copy(
    connection: AsyncConnection,
    table: str,
    columns: Sequence[str],
    types: Sequence[str],
    rows: Sequence[Sequence[Any]],
) -> None:
    """COPY rows in, binary (values adapted in psycopg's C code, not item by item as array
    parameters are; binary because text formats each timestamp through `isoformat`: 3 µs a
    value, 15 of a delivery row's 20, against 2 for the whole row in binary)."""
    if not rows:
        return
    raw = await connection.get_raw_connection()
    driver: psycopg.AsyncConnection[Any] = raw.driver_connection  # type: ignore[assignment]
    statement = f"COPY {table} ({', '.join(columns)}) FROM STDIN (FORMAT BINARY)"
    async with driver.cursor() as cursor, cursor.copy(statement) as copy:
        copy.set_types(types)
        for row in rows:
            await copy.write_row(row)


async def record_outcomes(
    session: AsyncSession,
    results: Sequence[AttemptResult],
    settings: Settings,
    set_aside: Sequence[DeliveryJob] = (),
) -> list[uuid.UUID]:
    """Write a batch of results (and deliveries set aside unsent, as pending); returns the
    ids of subscriptions it disabled."""
    if not results and not set_aside:
        return []
    ordered = sorted(results, key=lambda r: r.attempted_at)
    # Subscriptions first, in id order, as deleting one does (its row, then its deliveries):
    # locking in the other order would deadlock with a concurrent delete.
    tallies = tally(ordered)
    disabled, live = await _tally_subscriptions(session, tallies, settings)
    connection = await session.connection()
    # The last result per delivery wins (a batch holds at most one attempt of each, normally).
    rules = RetryRules(
        settings.retry_schedule_seconds, settings.retry_jitter, settings.retry_after_cap_seconds
    )
    steps = {r.job.delivery_id: (r, next_step(r, rules)) for r in ordered}
    # An event's first attempt is written in the row it creates, if its subscription is
    # still there (one deleted since its event was matched took its deliveries with it).
    firsts = [(r, step) for r, step in steps.values() if not r.job.stored]
    # Every other result (a retry; an earlier copy of the same first attempt) is a log row.
    in_rows = {id(r) for r, _ in firsts}
    attempt_rows = [_attempt_row(r) for r in ordered if id(r) not in in_rows]
    # The results' subscriptions are locked by their tally's UPDATE, which found those that
    # exist; the set-asides' others are locked here.
    live |= await _lock_subscriptions(
        connection, {job.subscription_id for job in set_aside} - tallies.keys()
    )
    firsts = [(r, step) for r, step in firsts if r.job.subscription_id in live]
    set_aside = [job for job in set_aside if job.subscription_id in live]
    now = datetime.now(UTC)
    new_rows = [_first_row(r, step) for r, step in firsts]
    new_rows += [_pending_row(job, now) for job in set_aside]
    try:
        # The common case, by COPY: nothing stored before, no subscription deleted meanwhile.
        async with connection.begin_nested():
            await _copy(connection, "deliveries", DELIVERY_COLUMNS, DELIVERY_COPY_TYPES, new_rows)
            await _copy(
                connection, "delivery_attempts", ATTEMPT_COLUMNS, ATTEMPT_COPY_TYPES, attempt_rows
            )
    except psycopg.errors.IntegrityError:
        # Otherwise row by row what may be written: first copies only, live references only.
        if new_rows:
            parameters = _as_arrays(DELIVERY_COLUMNS, new_rows)
            inserted = set((await connection.execute(_INSERT_DELIVERIES, parameters)).scalars())
            # A first attempt whose delivery was stored before (its event came again) joins
            # that delivery's attempt log.
            attempt_rows += [
                _attempt_row(r) for r, _ in firsts if r.job.delivery_id not in inserted
            ]
        if attempt_rows:
            await connection.execute(_INSERT_ATTEMPTS, _as_arrays(ATTEMPT_COLUMNS, attempt_rows))
    if set_aside:
        await wake_delivery_workers(session)
    updates = [(r, step) for r, step in steps.values() if r.job.stored]
    if updates:
        await connection.execute(
            _UPDATE_DELIVERIES,
            {
                "ids": [r.job.delivery_id for r, _ in updates],
                "statuses": [step.status for _, step in updates],
                "next_attempt_at": [step.next_attempt_at for _, step in updates],
                "attempted_at": [r.attempted_at for r, _ in updates],
                "status_codes": [r.status_code for r, _ in updates],
                "errors": [r.error for r, _ in updates],
                "completed_at": [step.completed_at for _, step in updates],
            },
        )
    return disabled


async def _lock_subscriptions(
    connection: AsyncConnection, subscription_ids: Set[uuid.UUID]
) -> set[uuid.UUID]:
    """`LOCK_SUBSCRIPTIONS`: those of `subscription_ids` that exist, locked."""
    if not subscription_ids:
        return set()
    ids = "{" + ",".join(sorted(s.hex for s in subscription_ids)) + "}"
    return set((await connection.execute(LOCK_SUBSCRIPTIONS, {"ids": ids})).scalars())


async def _tally_subscriptions(
    session: AsyncSession, tallies: dict[uuid.UUID, SubscriptionTally], settings: Settings
) -> tuple[list[uuid.UUID], set[uuid.UUID]]:
    """Each subscription's consecutive failures and last success (`tallies`); disables those
    that reach the threshold (or answered 410 Gone). Returns the ids disabled, and the ids
    that exist (their rows now locked by the UPDATE until the transaction ends)."""
    connection = await session.connection()
    to_disable: dict[uuid.UUID, str] = {}
    live: set[uuid.UUID] = set()
    for sub_id, entry in sorted(tallies.items()):
        row = (
            await connection.execute(
                _UPDATE_SUBSCRIPTION,
                {
                    "id": sub_id,
                    "reset": entry.reset,
                    "failures": entry.failures,
                    "last_success": entry.last_success,
                },
            )
        ).first()
        if row is None:
            continue
        live.add(sub_id)
        if not row.is_active:
            continue
        reason = disable_reason(
            gone=entry.gone, failure_count=row.failure_count, threshold=settings.failure_threshold
        )
        if reason is not None:
            to_disable[sub_id] = reason
    for sub_id, reason in to_disable.items():
        await disable_subscription(session, sub_id, reason)
    return list(to_disable), live
