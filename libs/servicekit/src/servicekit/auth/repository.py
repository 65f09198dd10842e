"""Queries on the `api_keys` table."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import text
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from servicekit.auth.api_keys import (
    AccessLevel,
    display_prefix,
    generate_api_key,
    hash_api_key,
)
from servicekit.db.models import ApiKey

# Who a key is, read on every authenticated request: a plain statement, as the ORM's select
# (built, compiled and its row turned into a model each time) cost more than the round trip.
_ACTIVE_KEY = text(
    "SELECT id, owner, level, email FROM api_keys WHERE key_hash = :key_hash AND revoked_at IS NULL"
)


@dataclass(frozen=True, slots=True)
class ActiveKey:
    id: uuid.UUID
    owner: str
    level: str
    email: str | None


class ApiKeyRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def create(
        self,
        *,
        prefix: str,
        owner: str,
        level: AccessLevel,
        email: str | None = None,
        description: str | None = None,
    ) -> tuple[ApiKey, str]:
        """Store a new key; returns the record and the plaintext, which exists only here."""
        plaintext = generate_api_key(prefix)
        record = ApiKey(
            owner=owner,
            level=level.value,
            key_hash=hash_api_key(plaintext),
            key_prefix=display_prefix(plaintext),
            email=email,
            description=description,
        )
        self.session.add(record)
        await self.session.flush()
        return record, plaintext

    async def find_active(self, plaintext: str) -> ApiKey | None:
        statement = select(ApiKey).where(
            ApiKey.key_hash == hash_api_key(plaintext), col(ApiKey.revoked_at).is_(None)
        )
        return (await self.session.exec(statement)).first()

    async def find_active_key(self, plaintext: str) -> ActiveKey | None:
        """`find_active`'s identity of the key, without loading the model."""
        return await self.find_active_key_by_hash(hash_api_key(plaintext))

    async def find_active_key_by_hash(self, key_hash: str) -> ActiveKey | None:
        connection = await self.session.connection()
        row = (await connection.execute(_ACTIVE_KEY, {"key_hash": key_hash})).first()
        return None if row is None else ActiveKey(*row)

    async def list_for_owner(self, owner: str) -> Sequence[ApiKey]:
        statement = (
            select(ApiKey)
            .where(ApiKey.owner == owner, col(ApiKey.revoked_at).is_(None))
            .order_by(col(ApiKey.created_at))
        )
        return (await self.session.exec(statement)).all()

    async def get_for_owner(self, key_id: uuid.UUID, owner: str) -> ApiKey | None:
        statement = select(ApiKey).where(
            ApiKey.id == key_id, ApiKey.owner == owner, col(ApiKey.revoked_at).is_(None)
        )
        return (await self.session.exec(statement)).first()

    async def get_active(self, key_id: uuid.UUID) -> ApiKey | None:
        """Any owner's active key (the operators' CLI)."""
        statement = select(ApiKey).where(ApiKey.id == key_id, col(ApiKey.revoked_at).is_(None))
        return (await self.session.exec(statement)).first()

    async def set_level(self, record: ApiKey, level: AccessLevel) -> None:
        record.level = level.value
        self.session.add(record)
        await self.session.flush()

    async def revoke(self, record: ApiKey) -> None:
        record.revoked_at = datetime.now(UTC)
        self.session.add(record)
        await self.session.flush()
