"""`POST /webhooks/events`: for producers that do not speak NATS."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

from fastapi import APIRouter, Header, Response, status
from servicekit.auth.dependencies import AdminPrincipal
from servicekit.web.errors import FlatErrorBody
from servicekit.web.session import SessionDep

from webhook_hub.dependencies import SettingsDep
from webhook_hub.errors import AUTH_ERRORS, INVALID
from webhook_hub.producer_events.schemas import EventAccepted, EventSubmission
from webhook_hub.producer_events.service import ProducerEventService

router = APIRouter(prefix="/events", tags=["events"])


@router.post(
    "",
    response_model=EventAccepted,
    status_code=status.HTTP_202_ACCEPTED,
    responses={
        **AUTH_ERRORS,
        **INVALID,
        403: {
            "model": FlatErrorBody,
            "description": "Level too low, another tenant, or a type the caller did not register",
        },
    },
)
async def submit_event(
    body: EventSubmission,
    principal: AdminPrincipal,
    session: SessionDep,
    settings: SettingsDep,
    response: Response,
    idempotency_key: Annotated[str | None, Header(max_length=200)] = None,
) -> EventAccepted:
    """Accept an event for dispatch. A consumer's key submits only types its owner registered,
    for its own owner only (403 otherwise); an operator key submits any type for any tenant.
    A repeated `Idempotency-Key` within the window returns the first event's id and publishes
    nothing new (`Idempotent-Replayed: true`)."""
    service = ProducerEventService(session, timedelta(hours=settings.idempotency_window_hours))
    event_id, fresh = await service.submit(principal, body, idempotency_key)
    if not fresh:
        response.headers["Idempotent-Replayed"] = "true"
    return EventAccepted(id=event_id)
