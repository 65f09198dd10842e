"""Wire shapes of the delivery log."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from webhook_hub.models import Delivery, DeliveryAttempt, DeliveryStatus


class DeliveryRead(BaseModel):
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
    attempted_at: datetime
    status_code: int | None
    response_body: str | None = Field(description="The first 4 KiB of the response")
    duration_ms: int
    error: str | None

    @classmethod
    def of(cls, row: DeliveryAttempt) -> AttemptRead:
        return cls.model_validate(row, from_attributes=True)


class DeliveryDetail(DeliveryRead):
    attempt_log: list[AttemptRead]


class DeliveryList(BaseModel):
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
    recovered: int
