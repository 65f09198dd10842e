"""Wire shapes of subscriptions."""

from __future__ import annotations

import uuid
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field, field_validator

from webhook_hub.models import Subscription
from webhook_hub.subscriptions.endpoint_policy import check_headers, check_url_form

EventNames = list[str]


def _check_event_names(events: list[str]) -> list[str]:
    cleaned = []
    for name in events:
        if not isinstance(name, str) or not 1 <= len(name) <= 200:
            raise ValueError("event names are strings of 1 to 200 characters")
        if name not in cleaned:
            cleaned.append(name)
    return cleaned


class SubscriptionCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    endpoint_url: str = Field(max_length=2048, examples=["https://example.com/webhooks"])
    events: EventNames = Field(min_length=1, max_length=500, examples=[["order.paid"]])
    description: str | None = Field(default=None, max_length=1000)
    headers: dict[str, str] = Field(default_factory=dict)
    timeout_seconds: int = Field(default=10, ge=1, le=30)

    _url = field_validator("endpoint_url")(check_url_form)
    _headers = field_validator("headers")(check_headers)
    _events = field_validator("events")(_check_event_names)


class SubscriptionUpdate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    endpoint_url: str | None = Field(default=None, max_length=2048)
    events: EventNames | None = Field(default=None, min_length=1, max_length=500)
    description: str | None = Field(default=None, max_length=1000)
    headers: dict[str, str] | None = None
    timeout_seconds: int | None = Field(default=None, ge=1, le=30)
    is_active: bool | None = Field(
        default=None, description="true re-enables a disabled subscription (failures reset)"
    )

    @field_validator("endpoint_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        return None if value is None else check_url_form(value)

    @field_validator("headers")
    @classmethod
    def _headers(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        return None if value is None else check_headers(value)

    @field_validator("events")
    @classmethod
    def _events(cls, value: list[str] | None) -> list[str] | None:
        return None if value is None else _check_event_names(value)


class Probe(BaseModel):
    reachable: bool
    status_code: int | None = None
    error: str | None = None


class SubscriptionRead(BaseModel):
    id: uuid.UUID
    consumer_id: uuid.UUID
    endpoint_url: str
    description: str | None
    events: list[str]
    is_active: bool
    headers: dict[str, str]
    timeout_seconds: int
    created_at: datetime
    updated_at: datetime
    last_delivery_at: datetime | None
    failure_count: int
    disabled_at: datetime | None
    disabled_reason: str | None
    secret_rotated_at: datetime | None

    @classmethod
    def of(cls, row: Subscription) -> SubscriptionRead:
        return cls.model_validate(row, from_attributes=True)


class SubscriptionCreated(SubscriptionRead):
    secret: str = Field(description="Shown only here and in the rotation response")
    test_sent: bool
    probe: Probe


class SubscriptionList(BaseModel):
    data: list[SubscriptionRead]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page")


class SecretRotated(BaseModel):
    secret: str
    valid_until: datetime = Field(description="Until then the previous secret also signs")
    note: str


class TestQueued(BaseModel):
    delivery_id: uuid.UUID
    test_sent: bool
