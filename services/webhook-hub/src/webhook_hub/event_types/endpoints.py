"""`GET /webhooks/event-types`, and `POST` for producers outside NATS to register their own."""

from __future__ import annotations

from fastapi import APIRouter, Response, status
from servicekit.auth.api_keys import AccessLevel
from servicekit.auth.dependencies import AdminPrincipal, ReadPrincipal
from servicekit.web.session import SessionDep

from webhook_hub.errors import AUTH_ERRORS, CONFLICT, INVALID
from webhook_hub.event_types.registration import EventTypeRegistrar
from webhook_hub.event_types.repository import EventTypeRepository
from webhook_hub.event_types.schemas import EventTypeList, EventTypeRead, EventTypeRegistration

router = APIRouter(prefix="/event-types", tags=["event-types"])


@router.get("", response_model=EventTypeList, response_model_by_alias=True, responses=AUTH_ERRORS)
async def list_event_types(principal: ReadPrincipal, session: SessionDep) -> EventTypeList:
    """Every type any service can emit, and those the caller registered, with their example
    payload and JSON schema. Only active types may be subscribed to."""
    repository = EventTypeRepository(session)
    rows = (
        await repository.list_all()
        if principal.level is AccessLevel.OPERATOR
        else await repository.list_visible(principal.owner)
    )
    return EventTypeList(data=[EventTypeRead.of(row) for row in rows])


@router.post(
    "",
    response_model=EventTypeRead,
    response_model_by_alias=True,
    status_code=status.HTTP_201_CREATED,
    responses={
        **AUTH_ERRORS,
        **INVALID,
        **CONFLICT,
        200: {"model": EventTypeRead, "description": "The caller's type, updated"},
    },
)
async def register_event_type(
    body: EventTypeRegistration, principal: AdminPrincipal, session: SessionDep, response: Response
) -> EventTypeRead:
    """Register a type of the caller's own (201), or update it (200). Only its owner may
    submit events of it; a name a service declares or another consumer holds is a 409."""
    row, created = await EventTypeRegistrar(session).register(principal.owner, body)
    if not created:
        response.status_code = status.HTTP_200_OK
    return EventTypeRead.of(row)
