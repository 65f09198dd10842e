"""Queries on `deliveries` and `delivery_attempts`."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import text, tuple_
from sqlalchemy.orm import defer
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from webhook_hub.errors import SubscriptionNotFound
from webhook_hub.models import Delivery, DeliveryAttempt, DeliveryStatus, Subscription

DELIVERIES_CHANNEL = "webhook_deliveries"


async def wake_delivery_workers(session: AsyncSession) -> None:
    """Delivered at commit, so workers look for due deliveries right away."""
    connection = await session.connection()
    await connection.execute(text(f"NOTIFY {DELIVERIES_CHANNEL}"))


_RESCHEDULE_FAILED = text(
    """
    WITH moved AS (
        UPDATE deliveries SET status = 'pending', next_attempt_at = now(), lease_until = NULL,
            completed_at = NULL
        WHERE subscription_id = :id AND status = 'failed' AND created_at >= :since
        RETURNING created_at
    )
    SELECT date_bin('1 hour', created_at, TIMESTAMPTZ '2000-01-01 00:00Z'), count(*)
    FROM moved GROUP BY 1
    """
)


# Subscriptions about to gain deliveries, locked as a foreign key's check would lock each
# (deliveries have none: migration 0015): a deletion waits until the writer commits, and its
# trigger then deletes those rows too. Those deleted already are not returned.
LOCK_SUBSCRIPTIONS = text(
    "SELECT id FROM subscriptions WHERE id = ANY(CAST(:ids AS uuid[])) FOR KEY SHARE"
)


class DeliveryRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def add(
        self,
        subscription_id: uuid.UUID,
        *,
        event_id: uuid.UUID,
        event_type: str,
        payload: dict[str, Any],
        event_time: datetime,
    ) -> Delivery:
        """A new pending delivery; SubscriptionNotFound when the subscription is gone (its
        row is locked until the transaction ends, as the engine's are: migration 0015)."""
        connection = await self.session.connection()
        live = await connection.execute(LOCK_SUBSCRIPTIONS, {"ids": [str(subscription_id)]})
        if live.first() is None:
            raise SubscriptionNotFound()
        delivery = Delivery(
            subscription_id=subscription_id,
            event_id=event_id,
            event_type=event_type,
            payload=payload,
            event_time=event_time,
        )
        self.session.add(delivery)
        await self.session.flush()
        await wake_delivery_workers(self.session)
        return delivery

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
            .where(DeliveryAttempt.delivery_id == delivery.id)
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
        statement = statement.order_by(
            col(Delivery.created_at).desc(), col(Delivery.id).desc()
        ).limit(limit)
        return (await self.session.exec(statement)).all()

    async def schedule_now(self, delivery: Delivery) -> None:
        """Attempt again now, whatever its state; its attempt history stays."""
        delivery.status = DeliveryStatus.PENDING
        delivery.next_attempt_at = await self._now()
        delivery.lease_until = None
        delivery.completed_at = None
        self.session.add(delivery)
        await self.session.flush()
        await wake_delivery_workers(self.session)

    async def reschedule_failed_since(
        self, subscription_id: uuid.UUID, since: datetime
    ) -> dict[datetime, int]:
        """Failed deliveries created since `since` due again now: how many, per UTC hour of
        creation (the portal's rollup forgets those hours)."""
        connection = await self.session.connection()
        rows = await connection.execute(_RESCHEDULE_FAILED, {"id": subscription_id, "since": since})
        await wake_delivery_workers(self.session)
        return {hour: int(count) for hour, count in rows}

    async def _now(self) -> datetime:
        connection = await self.session.connection()
        value = await connection.scalar(text("SELECT now()"))
        assert isinstance(value, datetime)
        return value
