"""Reads of `deliveries` and `delivery_attempts` for the API and the portal. Every write
(test events, retries, recover) goes through `delivery_engine.store.DeliveryWrites`."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import text, tuple_
from sqlalchemy.orm import defer
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from webhook_hub.delivery_engine.partitions import attempts_since
from webhook_hub.models import Delivery, DeliveryAttempt, DeliveryStatus, Subscription


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
