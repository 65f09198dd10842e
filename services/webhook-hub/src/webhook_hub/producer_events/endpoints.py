"""`POST /webhooks/events`: for producers that do not speak NATS."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Response, status
from servicekit.auth.dependencies import AdminPrincipal

from webhook_hub.dependencies import ProducerEventServiceDep
from webhook_hub.errors import (
    AUTH,
    BODY,
    EventDataInvalid,
    EventTypeInactive,
    EventTypeNotOwned,
    TenantNotAllowed,
    declared,
)
from webhook_hub.producer_events.schemas import EventAccepted, EventSubmission

router = APIRouter(prefix="/events", tags=["events"])


@router.post(
    "",
    response_model=EventAccepted,
    status_code=status.HTTP_202_ACCEPTED,
    responses=declared(
        *AUTH, *BODY, TenantNotAllowed, EventTypeNotOwned, EventTypeInactive, EventDataInvalid
    ),
    summary="Submit an event",
)
async def submit_event(
    body: EventSubmission,
    principal: AdminPrincipal,
    service: ProducerEventServiceDep,
    response: Response,
    idempotency_key: Annotated[str | None, Header(max_length=200)] = None,
) -> EventAccepted:
    """Accept an event for dispatch to every matching subscription. A consumer's key submits
    only types its owner registered, for its own owner only (403 otherwise); an operator key
    submits any type for any tenant. An event of a registered type must match the type's JSON
    schema (422 naming the failing path, e.g. `data.total: 'x' is not of type 'number'`) and
    is refused while the type is deactivated; nothing is recorded then. A repeated
    `Idempotency-Key` within the window returns the first event's id and publishes nothing
    new (`Idempotent-Replayed: true`)."""
    event_id, fresh = await service.submit(principal, body, idempotency_key)
    if not fresh:
        response.headers["Idempotent-Replayed"] = "true"
    return EventAccepted(id=event_id)
