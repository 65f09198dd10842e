"""Wire shapes of the delivery log."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

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


class RecoverRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    since: datetime = Field(description="Redeliver every failed delivery created since then")


class Recovered(BaseModel):
    recovered: int
