"""Queries on the local record of run webhooks."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

from sqlmodel import col, delete, select, update
from sqlmodel.ext.asyncio.session import AsyncSession

from scraper_manager.models import ScraperWebhook, WebhookStatus


class WebhookRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def add_pending(self, owner: str, url: str, events: list[str]) -> ScraperWebhook:
        webhook = ScraperWebhook(id=str(uuid.uuid4()), owner=owner, url=url, events=events)
        self.session.add(webhook)
        await self.session.flush()
        return webhook

    async def activate(self, webhook_id: str, subscription_id: str) -> ScraperWebhook:
        statement = (
            update(ScraperWebhook)
            .where(col(ScraperWebhook.id) == webhook_id)
            .values(subscription_id=subscription_id, status=WebhookStatus.ACTIVE)
            .returning(ScraperWebhook)
        )
        webhook: ScraperWebhook = (await self.session.exec(statement)).scalar_one()
        return webhook

    async def remove(self, webhook_id: str) -> None:
        await self.session.exec(delete(ScraperWebhook).where(col(ScraperWebhook.id) == webhook_id))

    async def active_of(self, owner: str) -> Sequence[ScraperWebhook]:
        statement = (
            select(ScraperWebhook)
            .where(ScraperWebhook.owner == owner, ScraperWebhook.status == WebhookStatus.ACTIVE)
            .order_by(col(ScraperWebhook.created_at))
        )
        return (await self.session.exec(statement)).all()

    async def active_by_subscription(
        self, owner: str, subscription_id: str
    ) -> ScraperWebhook | None:
        statement = select(ScraperWebhook).where(
            ScraperWebhook.owner == owner,
            ScraperWebhook.subscription_id == subscription_id,
            ScraperWebhook.status == WebhookStatus.ACTIVE,
        )
        return (await self.session.exec(statement)).first()

    async def owners_with_pending_before(self, cutoff: datetime) -> Sequence[str]:
        statement = (
            select(ScraperWebhook.owner)
            .where(
                ScraperWebhook.status == WebhookStatus.PENDING,
                col(ScraperWebhook.created_at) < cutoff,
            )
            .distinct()
        )
        return (await self.session.exec(statement)).all()

    async def pending_since(self, owner: str, cutoff: datetime) -> bool:
        statement = select(ScraperWebhook.id).where(
            ScraperWebhook.owner == owner,
            ScraperWebhook.status == WebhookStatus.PENDING,
            col(ScraperWebhook.created_at) >= cutoff,
        )
        return (await self.session.exec(statement.limit(1))).first() is not None

    async def remove_pending_before(self, owner: str, cutoff: datetime) -> None:
        await self.session.exec(
            delete(ScraperWebhook).where(
                col(ScraperWebhook.owner) == owner,
                col(ScraperWebhook.status) == WebhookStatus.PENDING,
                col(ScraperWebhook.created_at) < cutoff,
            )
        )
