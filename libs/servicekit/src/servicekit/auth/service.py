"""The rules of key management, the same in every service: an admin key manages its own
owner's keys, never another's, and no key revokes itself."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from sqlmodel.ext.asyncio.session import AsyncSession

from servicekit.auth.api_keys import AccessLevel
from servicekit.auth.repository import ApiKeyRepository
from servicekit.db.models import ApiKey
from servicekit.errors import Conflict, NotFound


class ApiKeyNotFound(NotFound):
    code = "api_key_not_found"
    default_message = "API key not found"


class KeyRevokesItself(Conflict):
    code = "key_revokes_itself"
    default_message = "A key cannot revoke itself; use another admin key"


class ApiKeyService:
    def __init__(self, session: AsyncSession, *, key_prefix: str) -> None:
        self.keys = ApiKeyRepository(session)
        self.key_prefix = key_prefix

    async def list_for(self, owner: str) -> Sequence[ApiKey]:
        return await self.keys.list_for_owner(owner)

    async def issue(
        self, owner: str, *, level: AccessLevel, email: str | None, description: str | None
    ) -> tuple[ApiKey, str]:
        """A new key for `owner`; the plaintext exists only in this return value."""
        return await self.keys.create(
            prefix=self.key_prefix, owner=owner, level=level, email=email, description=description
        )

    async def revoke(
        self, owner: str, key_id: uuid.UUID, *, caller_key_id: uuid.UUID | None
    ) -> None:
        record = await self.keys.get_for_owner(key_id, owner)
        if record is None:
            raise ApiKeyNotFound()
        if record.id == caller_key_id:
            raise KeyRevokesItself()
        await self.keys.revoke(record)
