"""Delivery jobs and attempt results made in memory, for the engine's pure decisions."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from webhook_hub.delivery_engine.jobs import (
    AttemptResult,
    DeliveryJob,
    Failure,
    FirstAttempt,
    StoredDelivery,
)

WHEN = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def make_job(
    subscription_id: uuid.UUID | None = None,
    *,
    owner: str = "acme",
    attempts: int = 0,
    endpoint_url: str = "http://127.0.0.1:9/hook",
    timeout_seconds: int = 10,
    retry_schedule: list[float] | None = None,
) -> DeliveryJob:
    kind = StoredDelivery if attempts > 0 else FirstAttempt
    return kind(
        delivery_id=uuid.uuid4(),
        subscription_id=subscription_id or uuid.uuid4(),
        event_type="order.paid",
        event_time=WHEN,
        payload_json=b'{"id":7}',
        attempts=attempts,
        endpoint_url=endpoint_url,
        secrets=["c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0"],
        headers={},
        timeout_seconds=timeout_seconds,
        event_id=uuid.uuid4(),
        owner=owner,
        retry_schedule=retry_schedule,
    )


def make_result(
    job: DeliveryJob | None = None,
    *,
    status: int | None = 200,
    failure: Failure | None = None,
    retry_after: str | None = None,
    at: datetime = WHEN,
) -> AttemptResult:
    return AttemptResult(
        job=job or make_job(),
        attempted_at=at,
        status_code=status,
        response_body=None,
        duration_ms=5,
        error=None if status is not None else "no answer",
        retry_after=retry_after,
        failure=failure,
    )
