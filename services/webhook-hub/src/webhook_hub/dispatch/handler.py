"""Dispatch: every event on `EVENTS` becomes one delivery per matching active subscription.

Runs inside the consumer's transaction, so the event is acknowledged only once its deliveries
are stored; `(subscription_id, event_id)` is unique, so a redelivered event adds nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime

from servicekit.events import CloudEvent
from sqlalchemy import text
from sqlalchemy.dialects.postgresql import insert
from sqlmodel.ext.asyncio.session import AsyncSession

from webhook_hub.deliveries.repository import DELIVERIES_CHANNEL
from webhook_hub.models import Delivery

_MATCHING = text(
    """
    SELECT id, owner, events FROM subscriptions
    WHERE is_active AND events && CAST(:types AS varchar[])
    """
)


async def dispatch_events(session: AsyncSession, events: Sequence[CloudEvent]) -> int:
    """Store the deliveries for a batch of events; returns how many were created."""
    connection = await session.connection()
    types = sorted({event.type for event in events} | {"*"})
    subscriptions = (await connection.execute(_MATCHING, {"types": types})).all()
    rows = []
    now = datetime.now(UTC)
    for event in events:
        for sub_id, owner, wanted in subscriptions:
            if event.type not in wanted and "*" not in wanted:
                continue
            if event.tenant is not None and owner != event.tenant:
                continue
            rows.append(
                {
                    "id": uuid.uuid4(),
                    "subscription_id": sub_id,
                    "event_id": event.id,
                    "event_type": event.type,
                    "payload": event.data,
                    "event_time": event.time,
                    "status": "pending",
                    "attempts": 0,
                    "next_attempt_at": now,
                    "created_at": now,
                }
            )
    if not rows:
        return 0
    table = Delivery.__table__  # type: ignore[attr-defined]
    statement = insert(table).on_conflict_do_nothing(index_elements=["subscription_id", "event_id"])
    await connection.execute(statement, rows)
    await connection.execute(text(f"NOTIFY {DELIVERIES_CHANNEL}"))
    return len(rows)
