"""Events from producers outside NATS, idempotent on their Idempotency-Key for a window."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from servicekit.events import record_event
from sqlalchemy import text
from sqlmodel.ext.asyncio.session import AsyncSession

from webhook_hub.producer_events.schemas import EventSubmission

_CLAIM_KEY = text(
    """
    INSERT INTO idempotency_keys (owner, key, event_id, created_at)
    VALUES (:owner, :key, :event_id, now())
    ON CONFLICT (owner, key) DO UPDATE
        SET event_id = EXCLUDED.event_id, created_at = EXCLUDED.created_at
        WHERE idempotency_keys.created_at < :expired_before
    RETURNING event_id
    """
)
_EXISTING = text("SELECT event_id FROM idempotency_keys WHERE owner = :owner AND key = :key")


class ProducerEventService:
    def __init__(self, session: AsyncSession, window: timedelta) -> None:
        self.session = session
        self.window = window

    async def submit(
        self, owner: str, submission: EventSubmission, idempotency_key: str | None
    ) -> tuple[uuid.UUID, bool]:
        """The event's id, and whether it is new (False: the key was seen inside the window)."""
        if idempotency_key is None:
            return await self._record(submission), True
        connection = await self.session.connection()
        candidate = uuid.uuid4()
        claimed = await connection.scalar(
            _CLAIM_KEY,
            {
                "owner": owner,
                "key": idempotency_key,
                "event_id": candidate,
                "expired_before": datetime.now(UTC) - self.window,
            },
        )
        if claimed is None:
            existing = await connection.scalar(_EXISTING, {"owner": owner, "key": idempotency_key})
            assert isinstance(existing, uuid.UUID)
            return existing, False
        return await self._record(submission, claimed), True

    async def _record(
        self, submission: EventSubmission, event_id: uuid.UUID | None = None
    ) -> uuid.UUID:
        return await record_event(
            self.session,
            submission.type,
            submission.data,
            tenant=submission.tenant,
            event_id=event_id,
        )
