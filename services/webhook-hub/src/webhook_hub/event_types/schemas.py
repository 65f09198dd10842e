"""Wire shapes of event types."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from servicekit.events.envelope import EVENT_TYPE_PATTERN
from servicekit.events.registry import Visibility

from webhook_hub.models import EventType


class EventTypeRead(BaseModel):
    name: str = Field(examples=["order.paid"])
    description: str
    example_payload: dict[str, Any]
    schema_: dict[str, Any] = Field(alias="schema", serialization_alias="schema")
    source: str
    owner: str | None = Field(
        description="The consumer that registered it over HTTP; null for a service's type"
    )
    visibility: Visibility = Field(
        description="`personal`: delivered only to operator-approved owners (or the event's "
        "own tenant)"
    )
    is_active: bool

    @classmethod
    def of(cls, row: EventType) -> EventTypeRead:
        return cls.model_validate(
            {
                "name": row.name,
                "description": row.description,
                "example_payload": row.example_payload,
                "schema": row.schema_,
                "source": row.source,
                "owner": row.owner,
                "visibility": row.visibility,
                "is_active": row.is_active,
            }
        )


class EventTypeList(BaseModel):
    data: list[EventTypeRead]


class EventTypeRegistration(BaseModel):
    """A type of the caller's own, for events it submits with `POST /webhooks/events`."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=EVENT_TYPE_PATTERN, max_length=200, examples=["invoice.paid"])
    description: str = Field(default="", max_length=2000)
    example_payload: dict[str, Any] = Field(default_factory=dict)
