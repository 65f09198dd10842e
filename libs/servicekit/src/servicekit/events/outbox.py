"""Writing events in the caller's transaction: the event exists exactly when the change does."""

from __future__ import annotations

import contextvars
import json
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
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


@dataclass(frozen=True, slots=True)
class NewEvent:
    """One event for `record_events`."""

    id: uuid.UUID
    type: str
    data: dict[str, Any]
    tenant: str | None = None
    # The context the event was submitted in, when it is written elsewhere (a group commit's
    # flush): its outbox record span is then a child of that request's, not of the flush's.
    context: contextvars.Context | None = None


# Every row in one statement, in the order given (their `seq`, hence publication order), and
# the relay woken once. The rows travel as one JSON array: one `json.dumps` in C, where six
# arrays cost psycopg a Python call per element (and the statement stays the same whatever
# the number of rows, so it is prepared once). The channel is OUTBOX_CHANNEL's.
_INSERT_MANY = text(
    """
    WITH inserted AS (
        INSERT INTO outbox_events (id, type, tenant, data, traceparent, tracestate, occurred_at)
        SELECT e.id, e.type, e.tenant, e.data, e.traceparent, e.tracestate, now()
        FROM ROWS FROM (
            jsonb_to_recordset(CAST(:events AS jsonb)) AS (
                id uuid, type text, tenant text, data jsonb, traceparent text, tracestate text
            )
        ) WITH ORDINALITY AS e(id, type, tenant, data, traceparent, tracestate, position)
        ORDER BY e.position
        RETURNING 1
    )
    SELECT pg_notify('outbox_events', '') FROM (SELECT 1 FROM inserted LIMIT 1) AS written
    """
)


async def record_events(session: AsyncSession, events: Sequence[NewEvent]) -> None:
    """`record_event` for many events at once: one statement in the session's transaction,
    rather than a flush and a NOTIFY each (what an HTTP batch of 500 would otherwise cost).
    Each event still gets its own outbox record span when tracing is on. Raises ValueError
    for a malformed type or data JSON cannot hold (NaN, infinities)."""
    if not events:
        return
    rows: list[dict[str, Any]] = []
    for event in events:
        if not _TYPE_RE.match(event.type):
            raise ValueError(f"event type {event.type!r} is not of the form <resource>.<action>")
        rows.append(_row(event) if event.context is None else event.context.run(_row, event))
    connection = await session.connection()
    await connection.execute(
        _INSERT_MANY, {"events": json.dumps(rows, separators=(",", ":"), allow_nan=False)}
    )


def _row(event: NewEvent) -> dict[str, Any]:
    with outbox_record_span(event.type, str(event.id)) as trace_headers:
        return {
            "id": str(event.id),
            "type": event.type,
            "tenant": event.tenant,
            "data": event.data,
            "traceparent": trace_headers.get(TRACEPARENT),
            "tracestate": trace_headers.get(TRACESTATE),
        }
