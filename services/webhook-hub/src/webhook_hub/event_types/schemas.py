"""Wire shapes of event types."""

from __future__ import annotations

from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field
from servicekit.events.envelope import EVENT_TYPE_PATTERN
from servicekit.events.registry import Visibility

from webhook_hub.models import EventType


class EventTypeRead(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "name": "invoice.paid",
                    "description": "An invoice was paid",
                    "example_payload": {"id": "inv_1001", "total": 99.5},
                    "schema": {
                        "type": "object",
                        "properties": {"id": {"type": "string"}, "total": {"type": "number"}},
                        "required": ["id", "total"],
                    },
                    "source": "api",
                    "owner": "acme",
                    "visibility": "public",
                    "is_active": True,
                }
            ]
        }
    )

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
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "data": [
                        {
                            "name": "order.paid",
                            "description": "An order was paid",
                            "example_payload": {"id": 1001, "status": "paid", "total": "99.50"},
                            "schema": {"type": "object"},
                            "source": "commerce-content",
                            "owner": None,
                            "visibility": "public",
                            "is_active": True,
                        }
                    ]
                }
            ]
        }
    )

    data: list[EventTypeRead]


INVOICE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"id": {"type": "string"}, "total": {"type": "number"}},
    "required": ["id", "total"],
}
INVOICE_EXAMPLE: dict[str, Any] = {"id": "inv_1001", "total": 99.5}


class EventTypeRegistration(BaseModel):
    """A type of the caller's own, for events it submits with `POST /webhooks/events`."""

    model_config = ConfigDict(
        extra="forbid",
        populate_by_name=True,
        json_schema_extra={
            "examples": [
                {
                    "name": "invoice.paid",
                    "description": "An invoice was paid",
                    "schema": INVOICE_SCHEMA,
                    "example_payload": INVOICE_EXAMPLE,
                }
            ]
        },
    )

    name: str = Field(pattern=EVENT_TYPE_PATTERN, max_length=200, examples=["invoice.paid"])
    description: str = Field(default="", max_length=2000)
    # `example` and `json_schema` too: the words other webhook services and the issue use.
    schema_: dict[str, Any] = Field(
        default_factory=dict,
        validation_alias=AliasChoices("schema", "json_schema"),
        serialization_alias="schema",
        description="A JSON Schema (2020-12 unless `$schema` names another draft) that every "
        "event's `data` must match; empty: any object",
    )
    example_payload: dict[str, Any] = Field(
        default_factory=dict,
        validation_alias=AliasChoices("example_payload", "example"),
        description="A sample `data`; must match `schema`",
    )


class EventTypeUpdate(BaseModel):
    """What the type's owner (or an operator) may change; absent fields stay as they are."""

    model_config = ConfigDict(
        extra="forbid",
        populate_by_name=True,
        json_schema_extra={"examples": [{"is_active": False}, {"description": "Paid in full"}]},
    )

    description: str | None = Field(default=None, max_length=2000)
    schema_: dict[str, Any] | None = Field(
        default=None,
        validation_alias=AliasChoices("schema", "json_schema"),
        serialization_alias="schema",
    )
    example_payload: dict[str, Any] | None = Field(
        default=None, validation_alias=AliasChoices("example_payload", "example")
    )
    is_active: bool | None = Field(
        default=None,
        description="false deactivates: the type can no longer be subscribed to and its "
        "events are refused; true reactivates it",
    )
