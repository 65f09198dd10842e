"""Queries on `portal_links`."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import text
from sqlmodel.ext.asyncio.session import AsyncSession

from webhook_hub.models import PortalLink


class PortalLinkRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def add(self, link: PortalLink) -> PortalLink:
        self.session.add(link)
        await self.session.flush()
        return link

    async def get(self, token_hash: str) -> PortalLink | None:
        return await self.session.get(PortalLink, token_hash)

    async def claim(self, token_hash: str, now: datetime) -> tuple[str, str] | None:
        """Mark the link used if it is unused and unexpired, in one statement (two tabs
        opening it at once: one wins); its owner and level, or None."""
        connection = await self.session.connection()
        row = (
            await connection.execute(
                text(
                    "UPDATE portal_links SET used_at = :now WHERE token_hash = :hash "
                    "AND used_at IS NULL AND expires_at > :now RETURNING owner, level"
                ),
                {"hash": token_hash, "now": now},
            )
        ).first()
        return None if row is None else (str(row[0]), str(row[1]))
