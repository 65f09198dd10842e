"""Test data for commerce-content."""

from __future__ import annotations

import uuid

from commerce_content.identity.dependencies import jwt_codec
from commerce_content.settings import Settings
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine


async def make_user(engine: AsyncEngine, role: str = "user", name: str | None = None) -> int:
    async with engine.begin() as conn:
        user_id = await conn.scalar(
            text(
                "INSERT INTO users (email, name, role, created_at)"
                " VALUES (:email, :name, :role, now()) RETURNING id"
            ),
            {"email": f"{uuid.uuid4().hex[:10]}@example.com", "name": name or "Ada", "role": role},
        )
    return int(user_id)


def bearer_for(settings: Settings, user_id: int, role: str) -> dict[str, str]:
    token = jwt_codec(settings).issue(str(user_id), {"role": role})
    return {"Authorization": f"Bearer {token}"}


def article_body(**overrides: object) -> dict[str, object]:
    body: dict[str, object] = {
        "title": f"Article {uuid.uuid4().hex[:8]}",
        "body": "Text of the article.",
        "status": "published",
        "tags": ["news"],
    }
    body.update(overrides)
    return body
