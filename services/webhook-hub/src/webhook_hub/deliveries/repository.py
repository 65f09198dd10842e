"""Reads of `deliveries` and `delivery_attempts` for the API and the portal. Every write
(test events, retries, recover) goes through `delivery_engine.store.DeliveryWrites`."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Text, cast, text, tuple_
from sqlalchemy.orm import defer
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from webhook_hub.models import Delivery, DeliveryAttempt, DeliveryStatus, Subscription
from webhook_hub.partitions import attempts_since


class DeliveryRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def get_owned(self, delivery_id: uuid.UUID, owner: str) -> Delivery | None:
        statement = (
            select(Delivery)
            .join(Subscription, col(Subscription.id) == col(Delivery.subscription_id))
            .where(Delivery.id == delivery_id, Subscription.owner == owner)
        )
        return (await self.session.exec(statement)).first()

    async def payload_text(self, delivery_id: uuid.UUID) -> str:
        """The payload as stored (`json` keeps the text sent), not parsed and dumped again."""
        statement = text("SELECT payload::text FROM deliveries WHERE id = :id")
        connection = await self.session.connection()
        return str((await connection.execute(statement, {"id": delivery_id})).scalar_one())

    async def attempts_of(self, delivery: Delivery) -> list[DeliveryAttempt]:
        """Every attempt of `delivery`, oldest first: the one its row holds (an event's first
        attempt, migration 0014) and those of `delivery_attempts`."""
        statement = (
            select(DeliveryAttempt)
            .where(
                DeliveryAttempt.delivery_id == delivery.id,
                # Only the attempt log's partitions that can hold them, not every one.
                col(DeliveryAttempt.attempted_at) >= attempts_since(delivery.created_at),
            )
            .order_by(col(DeliveryAttempt.attempted_at))
        )
        logged = list((await self.session.exec(statement)).all())
        first = delivery.first_attempt()
        if first is None:
            return logged
        return sorted([first, *logged], key=lambda attempt: attempt.attempted_at)

    async def page(
        self,
        subscription_id: uuid.UUID,
        *,
        limit: int,
        after: tuple[datetime, uuid.UUID] | None,
        status: DeliveryStatus | None,
        event_type: str | None,
        created_from: datetime | None = None,
        created_to: datetime | None = None,
        event_id: uuid.UUID | None = None,
        payload_like: str | None = None,
        down_to: tuple[datetime, uuid.UUID] | None = None,
    ) -> Sequence[Delivery]:
        # A page lists deliveries: the first attempt's answer (up to 4 KiB a row) is read
        # only with one delivery's attempt log, and touching it here fails loudly.
        statement = (
            select(Delivery)
            .options(defer(Delivery.first_response_body, raiseload=True))  # type: ignore[arg-type]
            .where(Delivery.subscription_id == subscription_id)
        )
        if after is not None:
            statement = statement.where(
                tuple_(col(Delivery.created_at), col(Delivery.id)) < tuple_(*after)
            )
        if status is not None:
            statement = statement.where(Delivery.status == status)
        if event_type is not None:
            statement = statement.where(Delivery.event_type == event_type)
        if created_from is not None:
            statement = statement.where(col(Delivery.created_at) >= created_from)
        if created_to is not None:
            statement = statement.where(col(Delivery.created_at) < created_to)
        if event_id is not None:
            statement = statement.where(Delivery.event_id == event_id)
        if payload_like is not None:
            # `json` keeps the text as sent: searched as it is, no index (see `scan_edge`).
            statement = statement.where(
                cast(Delivery.payload, Text).ilike(payload_like, escape="\\")
            )
        if down_to is not None:
            statement = statement.where(
                tuple_(col(Delivery.created_at), col(Delivery.id)) >= tuple_(*down_to)
            )
        statement = statement.order_by(
            col(Delivery.created_at).desc(), col(Delivery.id).desc()
        ).limit(limit)
        return (await self.session.exec(statement)).all()

    async def scan_edge(
        self,
        subscription_id: uuid.UUID,
        *,
        scan: int,
        after: tuple[datetime, uuid.UUID] | None,
        status: DeliveryStatus | None,
        event_type: str | None,
        created_from: datetime | None,
        created_to: datetime | None,
    ) -> tuple[datetime, uuid.UUID] | None:
        """The key of the `scan`-th delivery (newest first) the filters and `after` leave,
        where a payload search stops reading; None when no more than `scan` are left."""
        statement = select(col(Delivery.created_at), col(Delivery.id)).where(
            Delivery.subscription_id == subscription_id
        )
        if after is not None:
            statement = statement.where(
                tuple_(col(Delivery.created_at), col(Delivery.id)) < tuple_(*after)
            )
        if status is not None:
            statement = statement.where(Delivery.status == status)
        if event_type is not None:
            statement = statement.where(Delivery.event_type == event_type)
        if created_from is not None:
            statement = statement.where(col(Delivery.created_at) >= created_from)
        if created_to is not None:
            statement = statement.where(col(Delivery.created_at) < created_to)
        statement = (
            statement.order_by(col(Delivery.created_at).desc(), col(Delivery.id).desc())
            .offset(scan - 1)
            .limit(2)
        )
        rows = (await self.session.exec(statement)).all()
        return (rows[0][0], rows[0][1]) if len(rows) == 2 else None

    # --- the rate limit (issue 32) ---

    async def held_by_rate_limit(self, subscription_id: uuid.UUID, cap: int) -> int:
        """Pending deliveries of the subscription due now and not in flight (for a limited
        one: waiting for its bucket's tokens), counted up to `cap` (by the pending index)."""
        connection = await self.session.connection()
        count = await connection.scalar(
            text(
                "SELECT count(*) FROM (SELECT 1 FROM deliveries"
                " WHERE status = 'pending' AND subscription_id = :id"
                " AND next_attempt_at <= now() AND (lease_until IS NULL OR lease_until < now())"
                " LIMIT :cap) AS held"
            ),
            {"id": subscription_id, "cap": cap},
        )
        return int(count or 0)


# Ordered delivery: the keys of a subscription held by a failing head (the oldest first),
# each with its head's last answer and next attempt, and how many wait behind it (counted up
# to a bound: the page says "10,000 or more").
HELD_BEHIND_COUNTED = 10_000
_HELD_KEYS = text(
    """
    SELECT q.order_key, q.delivery_id, q.blocked_since, d.last_error, d.last_status_code,
           d.next_attempt_at, d.attempts,
           (SELECT count(*) FROM (SELECT 1 FROM ordered_pending r
                                  WHERE r.subscription_id = q.subscription_id
                                    AND r.order_key = q.order_key AND r.order_seq > q.order_seq
                                  LIMIT :counted) AS b) AS behind
    FROM ordered_pending q JOIN deliveries d ON d.id = q.delivery_id AND d.log_time = q.log_time
    WHERE q.subscription_id = :id AND q.blocked_since IS NOT NULL AND d.status = 'pending'
    ORDER BY q.blocked_since, q.order_key LIMIT :limit
    """
)


@dataclass(frozen=True)
class HeldKey:
    """A key held by its head, a delivery that failed and waits for its next attempt."""

    key: str
    head: uuid.UUID
    since: datetime
    last_error: str | None
    last_status_code: int | None
    next_attempt_at: datetime | None
    attempts: int
    behind: int


async def held_keys(session: AsyncSession, subscription_id: uuid.UUID, limit: int) -> list[HeldKey]:
    connection = await session.connection()
    rows = await connection.execute(
        _HELD_KEYS, {"id": subscription_id, "limit": limit, "counted": HELD_BEHIND_COUNTED}
    )
    return [HeldKey(*row) for row in rows]
