"""The rows a batch of outcomes writes, built without the database (pure): an event's first
attempt is a new delivery row already in the state the attempt left it in and holding that
attempt (its `first_*` columns), so a delivery that succeeds at once costs one row; later
attempts are rows of `delivery_attempts`; deliveries set aside without an attempt (their
subscription's queue was full) are new pending rows. The store (store.py) writes them, by
COPY or its INSERT fallbacks, in its columns' order.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from webhook_hub.delivery_engine.jobs import AttemptResult, DeliveryJob, NextStep
from webhook_hub.models import DeliveryStatus


def delivery_row(job: DeliveryJob, state: tuple[Any, ...], log_time: datetime) -> tuple[Any, ...]:
    """A new delivery row (`store.DELIVERY_COLUMNS`): the event's fields, then `state`, the
    columns from `status` on, then its partition key `log_time`."""
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
        log_time,
    )


def first_row(result: AttemptResult, step: NextStep, log_time: datetime) -> tuple[Any, ...]:
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
        None,
    )
    return delivery_row(result.job, state, log_time)


def pending_row(
    job: DeliveryJob,
    now: datetime,
    log_time: datetime,
    due: datetime | None = None,
    lease: datetime | None = None,
) -> tuple[Any, ...]:
    """A delivery set aside before its first attempt: due now (or at `due`: held by its
    subscription's breaker), for any worker's claim loop once its `lease` (kept by the worker
    that set it aside) is over."""
    state = (
        DeliveryStatus.PENDING,
        0,
        due or now,
        None,
        None,
        None,
        now,
        None,
        None,
        None,
        None,
        None,
        lease,
    )
    return delivery_row(job, state, log_time)


def ordered_row(job: DeliveryJob, now: datetime, log_time: datetime) -> tuple[Any, ...]:
    """An ordered delivery from dispatch (`store.ORDERED_DELIVERY_COLUMNS`): pending, not due
    (its key's turn comes through the ordered claim), with its key and sequence."""
    state = (DeliveryStatus.PENDING, 0, None, None, None, None, now, None, None, None, None, None)
    return (*delivery_row(job, (*state, None), log_time), job.order_key, job.order_seq)


def attempt_row(result: AttemptResult) -> tuple[Any, ...]:
    """A row of `delivery_attempts` (`store.ATTEMPT_COLUMNS`)."""
    return (
        result.job.delivery_id,
        result.attempted_at,
        result.status_code,
        result.response_body,
        result.duration_ms,
        result.error,
    )


def as_arrays(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> dict[str, list[Any]]:
    """The rows as one array per column, named as the column (the INSERTs' parameters)."""
    return {name: [row[n] for row in rows] for n, name in enumerate(columns)}
