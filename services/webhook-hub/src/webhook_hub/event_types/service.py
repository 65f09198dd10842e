"""The rules of event types over HTTP: who sees which, who may register or change one, and
what its schema and example must be.

A consumer's (admin) key registers types of its own: never a name a service declares or
another owner holds (409). It may change only its own types; another owner's type, or a
service's, is a 404 to it, as any other owner's resource is. An operator key may change any
type, but of a service's type only `is_active`: the rest comes from the service's code and
would be overwritten by the next sync.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from servicekit.auth.api_keys import AccessLevel
from servicekit.auth.dependencies import Principal
from sqlmodel.ext.asyncio.session import AsyncSession

from webhook_hub.errors import (
    DeclaredByService,
    EventDataInvalid,
    EventTypeInactive,
    EventTypeNotFound,
    EventTypeTaken,
    ExampleDoesNotMatchSchema,
    InvalidEventSchema,
)
from webhook_hub.event_types.repository import EventTypeRepository, SubmittableType
from webhook_hub.event_types.schema_check import (
    SchemaProblem,
    check_schema,
    compiled_schema,
    payload_errors,
    validator_errors,
)
from webhook_hub.event_types.schemas import EventTypeRegistration, EventTypeUpdate
from webhook_hub.events import TEST_EVENT_TYPE, registry
from webhook_hub.models import EventType


def checked_schema(schema: dict[str, Any], example: dict[str, Any]) -> None:
    """422 unless `schema` is a JSON Schema and `example` matches it."""
    try:
        check_schema(schema)
        problems = payload_errors(schema, example, "example_payload")
    except SchemaProblem as exc:
        raise InvalidEventSchema(str(exc)) from exc
    if problems:
        raise ExampleDoesNotMatchSchema("; ".join(problems), extra={"errors": problems})


def checked_event_data(event_type: SubmittableType, data: dict[str, Any]) -> None:
    """422 when the type is deactivated, or `data` breaks its schema (naming where)."""
    if not event_type.is_active:
        raise EventTypeInactive(
            f"Event type {event_type.name!r} is deactivated: events of it are refused"
        )
    try:
        problems = validator_errors(compiled_schema(event_type.schema_json), data, "data")
    except SchemaProblem as exc:
        raise EventDataInvalid(
            f"{event_type.name!r} has a schema that cannot apply: {exc}"
        ) from exc
    if problems:
        raise EventDataInvalid(
            f"data does not match the schema of {event_type.name!r}: {'; '.join(problems)}",
            extra={"errors": problems},
        )


class EventTypeService:
    def __init__(self, session: AsyncSession) -> None:
        self.event_types = EventTypeRepository(session)

    async def visible_to(self, principal: Principal) -> Sequence[EventType]:
        if principal.level is AccessLevel.OPERATOR:
            return await self.event_types.list_all()
        return await self.event_types.list_visible(principal.owner)

    async def register(self, owner: str, body: EventTypeRegistration) -> tuple[EventType, bool]:
        """The owner's type and whether it is new; 409 when the name is not theirs to take."""
        taken = EventTypeTaken(
            f"Event type {body.name!r} belongs to a service or another consumer; choose "
            "another name"
        )
        if body.name == TEST_EVENT_TYPE or body.name in registry:
            raise taken
        checked_schema(body.schema_, body.example_payload)
        registered = await self.event_types.register(
            owner, body.name, body.description, body.schema_, body.example_payload
        )
        if registered is None:
            raise taken
        return registered

    async def update(self, principal: Principal, name: str, patch: EventTypeUpdate) -> EventType:
        event_type = await self.event_types.get_for_update(name)
        operator = principal.level is AccessLevel.OPERATOR
        if event_type is None or (not operator and event_type.owner != principal.owner):
            raise EventTypeNotFound(f"Event type {name!r} not found among your types")
        changes = patch.model_dump(exclude_unset=True, exclude_none=True)
        content = {"description", "schema_", "example_payload"} & changes.keys()
        if event_type.owner is None and content:
            raise DeclaredByService(
                f"{name!r} is declared by a service in its code: only is_active may be "
                "changed over HTTP"
            )
        if {"schema_", "example_payload"} & changes.keys():
            checked_schema(
                changes.get("schema_", event_type.schema_),
                changes.get("example_payload", event_type.example_payload),
            )
        for field, value in changes.items():
            setattr(event_type, field, value)
        event_type.updated_at = datetime.now(UTC)
        return await self.event_types.save(event_type)


def matching(types: Sequence[EventType], query: str) -> list[EventType]:
    """The catalog's search: the types whose name or description holds every word of `query`
    (case-insensitive, any order); all of them for an empty query."""
    words = query.casefold().split()
    return [t for t in types if all(w in f"{t.name} {t.description}".casefold() for w in words)]
