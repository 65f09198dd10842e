"""`/webhooks/event-types`: the list, and for producers outside NATS, registering and changing
their own types."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Response, status
from servicekit.auth.dependencies import AdminPrincipal, ReadPrincipal
from servicekit.events.envelope import EVENT_TYPE_PATTERN

from webhook_hub.errors import (
    AUTH,
    BODY,
    DeclaredByService,
    EventTypeNotFound,
    EventTypeTaken,
    ExampleDoesNotMatchSchema,
    InvalidEventSchema,
    declared,
)
from webhook_hub.event_types.dependencies import EventTypeServiceDep
from webhook_hub.event_types.schemas import (
    EventTypeList,
    EventTypeRead,
    EventTypeRegistration,
    EventTypeUpdate,
)

router = APIRouter(prefix="/event-types", tags=["event-types"])
EventTypeName = Annotated[str, Path(pattern=EVENT_TYPE_PATTERN, max_length=200)]


@router.get(
    "",
    response_model=EventTypeList,
    response_model_by_alias=True,
    responses=declared(*AUTH),
    summary="List event types",
)
async def list_event_types(principal: ReadPrincipal, service: EventTypeServiceDep) -> EventTypeList:
    """Every type any service can emit, and those the caller registered, with their example
    payload and JSON schema (an operator key sees every consumer's too). Only active types may
    be subscribed to."""
    rows = await service.visible_to(principal)
    return EventTypeList(data=[EventTypeRead.of(row) for row in rows])


@router.post(
    "",
    response_model=EventTypeRead,
    response_model_by_alias=True,
    status_code=status.HTTP_201_CREATED,
    responses={
        **declared(*AUTH, *BODY, InvalidEventSchema, ExampleDoesNotMatchSchema, EventTypeTaken),
        200: {"model": EventTypeRead, "description": "The caller's type, updated"},
    },
    summary="Register an event type of your own",
)
async def register_event_type(
    body: EventTypeRegistration,
    principal: AdminPrincipal,
    service: EventTypeServiceDep,
    response: Response,
) -> EventTypeRead:
    """Register a type of the caller's own (201), or update it (200: description, schema and
    example; `is_active` stays). `schema` must be a valid JSON Schema and `example_payload` must
    match it (422 naming where otherwise); `POST /webhooks/events` then checks every event's
    `data` against it. Only its owner may submit events of it; a name a service declares or
    another consumer holds is a 409."""
    row, created = await service.register(principal.owner, body)
    if not created:
        response.status_code = status.HTTP_200_OK
    return EventTypeRead.of(row)


@router.patch(
    "/{name}",
    response_model=EventTypeRead,
    response_model_by_alias=True,
    responses=declared(
        *AUTH,
        *BODY,
        EventTypeNotFound,
        InvalidEventSchema,
        ExampleDoesNotMatchSchema,
        DeclaredByService,
    ),
    summary="Change or deactivate an event type",
)
async def update_event_type(
    name: EventTypeName,
    body: EventTypeUpdate,
    principal: AdminPrincipal,
    service: EventTypeServiceDep,
) -> EventTypeRead:
    """Change a type's description, schema or example, or deactivate (`is_active: false`) and
    reactivate it. An admin key changes only its owner's types (another owner's or a
    service's type is a 404); an operator key changes any, but of a service's type only
    `is_active`. A deactivated type can no longer be subscribed to (422 `unknown_event_types`)
    and its events are refused (422 `event_type_inactive`); existing subscriptions keep it."""
    return EventTypeRead.of(await service.update(principal, name, body))
