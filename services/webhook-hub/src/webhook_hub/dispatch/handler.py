"""Dispatch: every event on `EVENTS` becomes one delivery per matching active subscription.

Runs inside the consumer's transaction, so the event is acknowledged only once its deliveries
are stored; `(subscription_id, event_id)` is unique, so a redelivered event adds nothing.

The hot path: deliveries this worker has room for (per-subscription cap) are stored already
leased to it and handed to its engine once committed, without a claim round trip. The rest
are stored unleased, for any worker's claim loop.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from servicekit.events import CloudEvent
from sqlalchemy import text
from sqlmodel.ext.asyncio.session import AsyncSession

from webhook_hub.deliveries.repository import DELIVERIES_CHANNEL
from webhook_hub.delivery_engine.engine import DeliveryEngine
from webhook_hub.delivery_engine.policy import signing_secrets
from webhook_hub.delivery_engine.sender import DeliveryJob
from webhook_hub.settings import Settings

_MATCHING = text(
    """
    SELECT id, owner, events, endpoint_url, secret, secret_old, secret_rotated_at, headers,
           timeout_seconds
    FROM subscriptions
    WHERE is_active AND events && CAST(:types AS varchar[])
    """
)
# One statement per batch over arrays; the unique key makes a second dispatch add nothing,
# and RETURNING says which rows are new (only those may be sent).
_INSERT_DELIVERIES = text(
    """
    INSERT INTO deliveries (id, subscription_id, event_id, event_type, payload, event_time,
                            status, attempts, next_attempt_at, lease_until, created_at)
    SELECT d.id, d.subscription_id, d.event_id, d.event_type, d.payload, d.event_time,
           'pending', 0, :now, d.lease_until, :now
    FROM unnest(
        CAST(:ids AS uuid[]), CAST(:subscription_ids AS uuid[]), CAST(:event_ids AS uuid[]),
        CAST(:event_types AS text[]), CAST(:payloads AS jsonb[]),
        CAST(:event_times AS timestamptz[]), CAST(:leases AS timestamptz[])
    ) AS d(id, subscription_id, event_id, event_type, payload, event_time, lease_until)
    ON CONFLICT (subscription_id, event_id) DO NOTHING
    RETURNING id
    """
)


class Dispatcher:
    def __init__(self, settings: Settings, engine: DeliveryEngine | None = None) -> None:
        self.settings = settings
        self.engine = engine

    async def __call__(
        self, session: AsyncSession, events: Sequence[CloudEvent]
    ) -> list[DeliveryJob]:
        """Store the deliveries of a batch; returns the jobs leased to this worker."""
        connection = await session.connection()
        types = sorted({event.type for event in events} | {"*"})
        subscriptions = (await connection.execute(_MATCHING, {"types": types})).all()
        now = datetime.now(UTC)
        room: dict[uuid.UUID, int] = {}
        rows: list[tuple[uuid.UUID, Any, CloudEvent, datetime | None]] = []
        for event in events:
            for sub in subscriptions:
                if event.type not in sub.events and "*" not in sub.events:
                    continue
                if event.tenant is not None and sub.owner != event.tenant:
                    continue
                lease = None
                if self.engine is not None:
                    if sub.id not in room:
                        room[sub.id] = self.engine.room_for(sub.id)
                    if room[sub.id] > 0:
                        room[sub.id] -= 1
                        lease = now + timedelta(
                            seconds=sub.timeout_seconds * 2
                            + self.settings.delivery_lease_extra_seconds
                        )
                rows.append((uuid.uuid4(), sub, event, lease))
        if not rows:
            return []
        inserted = await connection.execute(
            _INSERT_DELIVERIES,
            {
                "ids": [row[0] for row in rows],
                "subscription_ids": [row[1].id for row in rows],
                "event_ids": [row[2].id for row in rows],
                "event_types": [row[2].type for row in rows],
                "payloads": [json.dumps(row[2].data) for row in rows],
                "event_times": [row[2].time for row in rows],
                "leases": [row[3] for row in rows],
                "now": now,
            },
        )
        new_ids = {row[0] for row in inserted}
        if len(new_ids) < len(rows) or any(row[3] is None for row in rows):
            await connection.execute(text(f"NOTIFY {DELIVERIES_CHANNEL}"))
        return [
            DeliveryJob(
                delivery_id=delivery_id,
                subscription_id=sub.id,
                event_type=event.type,
                event_time=event.time,
                payload=event.data,
                attempts=0,
                endpoint_url=sub.endpoint_url,
                secrets=signing_secrets(
                    sub.secret,
                    sub.secret_old,
                    sub.secret_rotated_at,
                    now,
                    self.settings.secret_transition_seconds,
                ),
                headers=sub.headers,
                timeout_seconds=sub.timeout_seconds,
            )
            for delivery_id, sub, event, lease in rows
            if lease is not None and delivery_id in new_ids
        ]
