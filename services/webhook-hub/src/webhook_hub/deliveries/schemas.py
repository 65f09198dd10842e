"""Wire shapes of the delivery log."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field
from pydantic.config import JsonDict

from webhook_hub.models import Delivery, DeliveryAttempt, DeliveryStatus

_DELIVERY_EXAMPLE: JsonDict = {
    "id": "9a1e2b3c-4d5e-4f60-8a7b-1c2d3e4f5a6b",
    "subscription_id": "3f0c9a4e-8d1b-4c55-a7e2-5b9d0e6f1a23",
    "event_id": "5d6e7f80-9a1b-4c2d-8e3f-4a5b6c7d8e9f",
    "event_type": "order.paid",
    "payload": {
        "id": 1001,
        "status": "paid",
        "total": "99.50",
        "created_at": "2026-11-22T10:00:00Z",
    },
    "status": "succeeded",
    "attempts": 1,
    "next_attempt_at": None,
    "last_attempt_at": "2026-11-22T10:00:01Z",
    "last_status_code": 200,
    "last_error": None,
    "created_at": "2026-11-22T10:00:00Z",
    "completed_at": "2026-11-22T10:00:01Z",
}
_ATTEMPT_EXAMPLE: JsonDict = {
    "attempted_at": "2026-11-22T10:00:01Z",
    "status_code": 200,
    "response_body": "ok",
    "duration_ms": 42,
    "error": None,
}


class DeliveryRead(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [_DELIVERY_EXAMPLE]})

    id: uuid.UUID
    subscription_id: uuid.UUID
    event_id: uuid.UUID
    event_type: str
    payload: dict[str, Any]
    status: DeliveryStatus
    attempts: int
    next_attempt_at: datetime | None
    last_attempt_at: datetime | None
    last_status_code: int | None
    last_error: str | None
    created_at: datetime
    completed_at: datetime | None

    @classmethod
    def of(cls, row: Delivery) -> DeliveryRead:
        return cls.model_validate(row, from_attributes=True)


class AttemptRead(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [_ATTEMPT_EXAMPLE]})

    attempted_at: datetime
    status_code: int | None
    response_body: str | None = Field(description="The first 4 KiB of the response")
    duration_ms: int
    error: str | None

    @classmethod
    def of(cls, row: DeliveryAttempt) -> AttemptRead:
        return cls.model_validate(row, from_attributes=True)


class DeliveryDetail(DeliveryRead):
    model_config = ConfigDict(
        json_schema_extra={"examples": [{**_DELIVERY_EXAMPLE, "attempt_log": [_ATTEMPT_EXAMPLE]}]}
    )

    attempt_log: list[AttemptRead]


class DeliveryList(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={"examples": [{"data": [_DELIVERY_EXAMPLE], "next_cursor": None}]}
    )

    data: list[DeliveryRead]
    next_cursor: str | None


SINCE_FORMAT = "an ISO 8601 date-time with a UTC offset, e.g. 2026-11-22T10:00:00Z"


def _aware_instant(value: Any) -> datetime:
    """`since` as the spec's timestamps are written; a naive time would be read in the
    database server's zone, so an offset is required."""
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            raise ValueError(f"since must be {SINCE_FORMAT}; got {value[:40]!r}") from None
    else:
        raise ValueError(f"since must be {SINCE_FORMAT}")
    if parsed.tzinfo is None:
        raise ValueError(f"since must be {SINCE_FORMAT}: add the offset (Z for UTC)")
    return parsed


class RecoverRequest(BaseModel):
    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"since": "2026-11-22T10:00:00Z"}]}
    )

    since: Annotated[datetime, BeforeValidator(_aware_instant)] = Field(
        description=f"Redeliver every failed delivery created at or after this moment: "
        f"{SINCE_FORMAT}"
    )


class Recovered(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [{"recovered": 3}]})

    recovered: int
