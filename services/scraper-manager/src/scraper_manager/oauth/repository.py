"""The queries of OAuth2 clients."""

from __future__ import annotations

from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from scraper_manager.models import OAuthClient


class OAuthClientRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def active(self, client_id: str) -> OAuthClient | None:
        statement = select(OAuthClient).where(
            OAuthClient.client_id == client_id, col(OAuthClient.revoked_at).is_(None)
        )
        return (await self.session.exec(statement)).first()
