"""Test data for scraper-manager."""

from __future__ import annotations

import uuid
from typing import Any

from servicekit.auth import AccessLevel
from servicekit.auth.repository import ApiKeyRepository
from servicekit.db.engine import create_session_factory
from sqlalchemy.ext.asyncio import AsyncEngine


class Client:
    def __init__(self, owner: str, key: str) -> None:
        self.owner = owner
        self.headers = {"Authorization": f"Bearer {key}"}


async def make_client(
    engine: AsyncEngine, level: str = "admin", owner: str | None = None
) -> Client:
    owner = owner or f"client-{uuid.uuid4().hex[:8]}"
    async with create_session_factory(engine)() as session, session.begin():
        _, key = await ApiKeyRepository(session).create(
            prefix="smk", owner=owner, level=AccessLevel(level)
        )
    return Client(owner, key)


def scraper_body(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"name": "catalog", "url": "http://127.0.0.1:9/start"}
    body.update(overrides)
    return body
