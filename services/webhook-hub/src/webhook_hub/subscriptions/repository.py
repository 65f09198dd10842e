"""Queries on `subscriptions` and `consumers`."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import or_, text, tuple_
from sqlalchemy.dialects.postgresql import insert
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from webhook_hub.models import Consumer, Subscription


class SubscriptionRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def ensure_consumer(self, owner: str, email: str | None) -> Consumer:
        statement = insert(Consumer.__table__).values(  # type: ignore[attr-defined]
            owner=owner, id=uuid.uuid4(), email=email, created_at=text("now()")
        )
        if email:
            statement = statement.on_conflict_do_update(
                index_elements=["owner"], set_={"email": email}
            )
        else:
            statement = statement.on_conflict_do_nothing(index_elements=["owner"])
        await self.session.exec(statement)
        consumer = await self.session.get(Consumer, owner)
        assert consumer is not None
        return consumer

    async def personal_data_approved(self, owner: str) -> bool:
        consumer = await self.session.get(Consumer, owner)
        return consumer is not None and consumer.personal_data_approved

    async def set_personal_data_approval(self, owner: str, approved: bool) -> None:
        statement = insert(Consumer.__table__).values(  # type: ignore[attr-defined]
            owner=owner, id=uuid.uuid4(), personal_data_approved=approved, created_at=text("now()")
        )
        statement = statement.on_conflict_do_update(
            index_elements=["owner"], set_={"personal_data_approved": approved}
        )
        await self.session.exec(statement)

    async def lock_and_count(self, owner: str) -> int:
        """The owner's subscriptions, counted with its consumer row locked, so two creations
        at once cannot both take the last place under the cap."""
        connection = await self.session.connection()
        await connection.execute(
            text("SELECT 1 FROM consumers WHERE owner = :owner FOR UPDATE"), {"owner": owner}
        )
        count = await connection.scalar(
            text("SELECT count(*) FROM subscriptions WHERE owner = :owner"), {"owner": owner}
        )
        return int(count or 0)

    async def add(self, subscription: Subscription) -> Subscription:
        self.session.add(subscription)
        await self.session.flush()
        return subscription

    async def get_owned(self, subscription_id: uuid.UUID, owner: str) -> Subscription | None:
        statement = select(Subscription).where(
            Subscription.id == subscription_id, Subscription.owner == owner
        )
        return (await self.session.exec(statement)).first()

    async def get_owned_for_update(
        self, subscription_id: uuid.UUID, owner: str
    ) -> Subscription | None:
        statement = (
            select(Subscription)
            .where(Subscription.id == subscription_id, Subscription.owner == owner)
            .with_for_update()
        )
        return (await self.session.exec(statement)).first()

    async def page(
        self,
        owner: str,
        *,
        limit: int,
        after: tuple[datetime, uuid.UUID] | None,
        is_active: bool | None,
        event_type: str | None,
        created_by_source: str | None = None,
    ) -> Sequence[Subscription]:
        statement = select(Subscription).where(Subscription.owner == owner)
        if after is not None:
            statement = statement.where(
                tuple_(col(Subscription.created_at), col(Subscription.id)) < tuple_(*after)
            )
        if is_active is not None:
            statement = statement.where(Subscription.is_active == is_active)
        if event_type is not None:
            statement = statement.where(
                or_(
                    col(Subscription.events).contains([event_type]),
                    col(Subscription.events).contains(["*"]),
                )
            )
        if created_by_source is not None:
            statement = statement.where(Subscription.created_by_source == created_by_source)
        statement = statement.order_by(
            col(Subscription.created_at).desc(), col(Subscription.id).desc()
        ).limit(limit)
        return (await self.session.exec(statement)).all()

    async def delete(self, subscription: Subscription) -> None:
        await self.session.delete(subscription)
        await self.session.flush()

    # --- an owner's delivery defaults (issue 32); added last -------------------------------

    async def owner_defaults(self, owner: str) -> tuple[list[int] | None, int | None]:
        """The owner's default retry schedule (seconds) and timeout; (None, None) for an owner
        with no consumer row yet or no defaults."""
        row = (
            await (await self.session.connection()).execute(
                text(
                    "SELECT default_retry_schedule, default_timeout_seconds FROM consumers"
                    " WHERE owner = :owner"
                ),
                {"owner": owner},
            )
        ).first()
        return (None, None) if row is None else (row[0], row[1])

    async def set_owner_defaults(
        self, owner: str, email: str | None, schedule: list[int] | None, timeout: int | None
    ) -> None:
        await self.ensure_consumer(owner, email)
        await (await self.session.connection()).execute(
            text(
                "UPDATE consumers SET default_retry_schedule = :schedule,"
                " default_timeout_seconds = :timeout WHERE owner = :owner"
            ),
            {"owner": owner, "schedule": schedule, "timeout": timeout},
        )
