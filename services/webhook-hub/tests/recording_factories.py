"""Subscriptions, first attempts and the delivery rows they leave: for the tests of how
outcomes are recorded."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime

from pydantic_core import to_json
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlmodel.ext.asyncio.session import AsyncSession
from webhook_hub.delivery_engine.jobs import AttemptResult, FirstAttempt, delivery_id_for
from webhook_hub.models import Consumer, Subscription


async def make_subscription(session: AsyncSession) -> Subscription:
    owner = f"consumer-{uuid.uuid4().hex[:8]}"
    consumer = Consumer(owner=owner, id=uuid.uuid4())
    subscription = Subscription(
        consumer_id=consumer.id,
        owner=owner,
        endpoint_url="http://127.0.0.1:9/hook",
        secret="c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0",
        events=["order.paid"],
    )
    session.add(consumer)
    session.add(subscription)
    await session.flush()
    return subscription


def first_attempt(subscription: Subscription, status: int | None = 200) -> AttemptResult:
    event_id = uuid.uuid4()
    job = FirstAttempt(
        delivery_id=delivery_id_for(subscription.id, event_id),
        subscription_id=subscription.id,
        event_type="order.paid",
        event_time=datetime.now(UTC),
        payload_json=to_json({"id": 7, "note": 'caf\u00e9 "quoted" \\ tab\t'}),
        attempts=0,
        endpoint_url=subscription.endpoint_url,
        secrets=[subscription.secret],
        headers={},
        timeout_seconds=10,
        event_id=event_id,
    )
    return AttemptResult(
        job=job,
        attempted_at=datetime.now(UTC),
        status_code=status,
        response_body="ok" if status else None,
        duration_ms=3,
        error=None if status else "ConnectionRefusedError: refused",
        retry_after=None,
    )


async def rows_of(session: AsyncSession, subscription_id: uuid.UUID) -> list[tuple[object, ...]]:
    """(status, attempts, payload, attempts recorded: in the row and in the log)."""
    connection = await session.connection()
    result = await connection.execute(
        text(
            "SELECT d.status, d.attempts, d.payload,"
            " count(a.id) + CAST(d.first_duration_ms IS NOT NULL AS int) FROM deliveries d"
            " LEFT JOIN delivery_attempts a ON a.delivery_id = d.id"
            " WHERE d.subscription_id = :id GROUP BY d.id, d.log_time ORDER BY d.created_at"
        ),
        {"id": subscription_id},
    )
    return [tuple(row) for row in result]


@contextlib.asynccontextmanager
async def committed_subscription_of_a_new_owner(
    db_engine: AsyncEngine,
) -> AsyncIterator[Subscription]:
    """A subscription of an owner of its own, committed for real, removed with its owner
    after."""
    async with AsyncSession(db_engine, expire_on_commit=False) as session:
        subscription = await make_subscription(session)
        await session.commit()
    try:
        yield subscription
    finally:
        async with db_engine.begin() as connection:
            for table in ("subscriptions", "consumers"):
                await connection.execute(
                    text(f"DELETE FROM {table} WHERE owner = :owner"),  # noqa: S608
                    {"owner": subscription.owner},
                )
