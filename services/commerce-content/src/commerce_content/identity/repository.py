"""User look-ups."""

from __future__ import annotations

from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from commerce_content.models import User


class UserRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def get(self, user_id: int) -> User | None:
        return await self.session.get(User, user_id)

    async def exists(self, user_id: int) -> bool:
        found = await self.session.scalar(select(col(User.id)).where(col(User.id) == user_id))
        return found is not None
