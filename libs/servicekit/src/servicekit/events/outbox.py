"""Writing events in the caller's transaction: the event exists exactly when the change does."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from servicekit.db.models import OutboxEvent
from servicekit.events.envelope import EVENT_TYPE_PATTERN, new_event_id
from servicekit.tracing.propagation import TRACEPARENT, TRACESTATE
from servicekit.tracing.spans import outbox_record_span

OUTBOX_CHANNEL = "outbox_events"
_TYPE_RE = re.compile(EVENT_TYPE_PATTERN)


async def record_event(
    session: AsyncSession,
    type: str,
    data: BaseModel | dict[str, Any],
    tenant: str | None = None,
    *,
    event_id: uuid.UUID | None = None,
) -> uuid.UUID:
    """Add an outbox row to the session's transaction and wake the relay when it commits.

    Nothing is published here: the relay publishes after commit, and a rollback leaves no row.
    """
    if not _TYPE_RE.match(type):
        raise ValueError(f"event type {type!r} is not of the form <resource>.<action>")
    payload = data.model_dump(mode="json") if isinstance(data, BaseModel) else data
    new_id = event_id or new_event_id()
    with outbox_record_span(type, str(new_id)) as trace_headers:
        event = OutboxEvent(
            id=new_id,
            type=type,
            tenant=tenant,
            data=payload,
            traceparent=trace_headers.get(TRACEPARENT),
            tracestate=trace_headers.get(TRACESTATE),
            occurred_at=datetime.now(UTC),
        )
        session.add(event)
        await session.flush()
        # NOTIFY inside a transaction is delivered at commit, and never for a rollback.
        connection = await session.connection()
        await connection.execute(text(f"NOTIFY {OUTBOX_CHANNEL}"))
    return event.id
