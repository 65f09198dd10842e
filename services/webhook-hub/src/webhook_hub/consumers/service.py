"""Operator settings of consumers (owners), for the API and the console script alike."""

from __future__ import annotations

from sqlmodel.ext.asyncio.session import AsyncSession

from webhook_hub.subscriptions.repository import SubscriptionRepository


class ConsumerService:
    def __init__(self, session: AsyncSession) -> None:
        self.consumers = SubscriptionRepository(session)

    async def set_personal_data_approval(self, owner: str, approved: bool) -> None:
        """Approved owners may subscribe to, and receive, event types of personal data."""
        await self.consumers.set_personal_data_approval(owner, approved)
