"""Wire shapes of events sent by producers over HTTP."""

from __future__ import annotations

import uuid
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from servicekit.events.envelope import EVENT_TYPE_PATTERN


class EventSubmission(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"type": "invoice.paid", "data": {"id": "inv_1001", "total": 99.5}}]
        },
    )

    type: str = Field(pattern=EVENT_TYPE_PATTERN, max_length=200, examples=["invoice.paid"])
    data: dict[str, Any]
    tenant: str | None = Field(
        default=None,
        max_length=200,
        description="Deliver only to this consumer's subscriptions. A consumer's key may give "
        "only its own owner (the default); other tenants need an operator key",
    )


class EventAccepted(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={"examples": [{"id": "5d6e7f80-9a1b-4c2d-8e3f-4a5b6c7d8e9f"}]}
    )

    id: uuid.UUID
