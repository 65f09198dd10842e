"""Wire shapes of event types."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from webhook_hub.models import EventType


class EventTypeRead(BaseModel):
    name: str = Field(examples=["order.paid"])
    description: str
    example_payload: dict[str, Any]
    schema_: dict[str, Any] = Field(alias="schema", serialization_alias="schema")
    source: str
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
                "is_active": row.is_active,
            }
        )


class EventTypeList(BaseModel):
    data: list[EventTypeRead]
