"""Events from producers outside NATS, idempotent on their Idempotency-Key for a window.

Who may submit what: a consumer's key submits only types its owner registered, and only for
itself (the event's tenant is its owner, so nobody else receives it); an operator key (CLI
only) submits any type for any tenant, or for everyone.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from servicekit.auth.api_keys import AccessLevel
from servicekit.auth.dependencies import Principal
from servicekit.errors import Forbidden
from servicekit.events import record_event
from sqlalchemy import text
from sqlmodel.ext.asyncio.session import AsyncSession

from webhook_hub.event_types.repository import EventTypeRepository
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


class TenantNotAllowed(Forbidden):
    code = "tenant_not_allowed"


class EventTypeNotOwned(Forbidden):
    code = "event_type_not_owned"


class ProducerEventService:
    def __init__(self, session: AsyncSession, window: timedelta) -> None:
        self.session = session
        self.window = window

    async def authorize(self, principal: Principal, submission: EventSubmission) -> str | None:
        """The tenant the event is recorded for; 403 when the caller may not send it."""
        if principal.level is AccessLevel.OPERATOR:
            return submission.tenant
        if submission.tenant is not None and submission.tenant != principal.owner:
            raise TenantNotAllowed(
                "A consumer's key submits events only for its own owner; events for other "
                "tenants need an operator key"
            )
        # The same answer whether the name is unknown, a service's or another owner's: no
        # oracle for other owners' type names.
        if not await EventTypeRepository(self.session).is_active_type_of(
            submission.type, principal.owner
        ):
            raise EventTypeNotOwned(
                f"Event type {submission.type!r} is not an active type you registered "
                "(POST /webhooks/event-types); services' types need an operator key"
            )
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
        return await self._record(submission, tenant, claimed), True

    async def _record(
        self, submission: EventSubmission, tenant: str | None, event_id: uuid.UUID | None = None
    ) -> uuid.UUID:
        return await record_event(
            self.session, submission.type, submission.data, tenant=tenant, event_id=event_id
        )
