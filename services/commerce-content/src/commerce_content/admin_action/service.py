"""The audit log of admin actions."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlmodel.ext.asyncio.session import AsyncSession

from commerce_content.models import AuditLog

DEFAULT_ACTION = "admin-action"


class AuditService:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def record(self, user_id: str, body: Any) -> AuditLog:
        """The action name is the body's `action` when it is a non-empty string, else
        "admin-action"; a body that is not an object is kept as `{"body": ...}`."""
        action = body.get("action") if isinstance(body, dict) else None
        entry = AuditLog(
            action=action if isinstance(action, str) and action else DEFAULT_ACTION,
            user_id=user_id,
            timestamp=datetime.now(UTC).isoformat(),
            data=body if isinstance(body, dict) else {"body": body},
        )
        self.session.add(entry)
        await self.session.flush()
        return entry
