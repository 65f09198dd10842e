"""Events from producers outside NATS, idempotent on their Idempotency-Key for a window.

Who may submit what: a consumer's key submits only types its owner registered, and only for
itself (the event's tenant is its owner, so nobody else receives it); an operator key (CLI
only) submits any type for any tenant, or for everyone. Whoever submits it, an event of a
registered type is refused while the type is deactivated and must match its schema (422,
nothing recorded); an operator's event of a type nobody registered is accepted as it is and
reaches `*` subscriptions only (nobody can subscribe to the name).
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from servicekit.auth.api_keys import AccessLevel
from servicekit.auth.dependencies import Principal
from servicekit.events import new_event_id, record_event
from sqlalchemy import text
from sqlmodel.ext.asyncio.session import AsyncSession

from webhook_hub.errors import EventTypeNotOwned, TenantNotAllowed
from webhook_hub.event_types.repository import EventTypeRepository
from webhook_hub.event_types.service import checked_event_data
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

    async def authorize(self, principal: Principal, submission: EventSubmission) -> str | None:
        """The tenant the event is recorded for; 403 when the caller may not send it, 422
        when its type is deactivated or its data breaks the type's schema."""
        event_type = await EventTypeRepository(self.session).get(submission.type)
        if principal.level is AccessLevel.OPERATOR:
            if event_type is not None:
                checked_event_data(event_type, submission.data)
            return submission.tenant
        if submission.tenant is not None and submission.tenant != principal.owner:
            raise TenantNotAllowed()
        # The same answer whether the name is unknown, a service's or another owner's: no
        # oracle for other owners' type names.
        if event_type is None or event_type.owner != principal.owner:
            raise EventTypeNotOwned(
                f"Event type {submission.type!r} is not a type you registered "
                "(POST /webhooks/event-types); services' types need an operator key"
            )
        checked_event_data(event_type, submission.data)
        return principal.owner

    async def submit(
        self, principal: Principal, submission: EventSubmission, idempotency_key: str | None
    ) -> tuple[uuid.UUID, bool]:
        """The event's id, and whether it is new (False: the key was seen inside the window)."""
        tenant = await self.authorize(principal, submission)
        owner = principal.owner
        if idempotency_key is None:
            return await self._record(submission, tenant), True
        connection = await self.session.connection()
        candidate = new_event_id()
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
        return await self._record(submission, tenant, claimed), True

    async def _record(
        self, submission: EventSubmission, tenant: str | None, event_id: uuid.UUID | None = None
    ) -> uuid.UUID:
        return await record_event(
            self.session, submission.type, submission.data, tenant=tenant, event_id=event_id
        )
