"""Wire shapes of subscriptions."""

from __future__ import annotations

import uuid
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.config import JsonDict
from servicekit.contracts.webhook_hub import SubscriptionOrdering, SubscriptionRecord

from webhook_hub.models import Subscription
from webhook_hub.subscriptions.endpoint_policy import check_headers, check_url_form

EventNames = list[str]
# What PATCH (and the portal's endpoint form) may change besides `is_active`.
EDITABLE_FIELDS = (
    "endpoint_url",
    "events",
    "description",
    "headers",
    "timeout_seconds",
    "send_trace_context",
    "ordering",
)
# Fields PATCH sets to null when sent as null (the others: null leaves them as they are).
NULLABLE_FIELDS = ("description", "ordering")
_ORDERING = (
    "Ordered delivery by key: events of one key are attempted one at a time in the order "
    "they were published; a failing one holds the ones behind it. `key` is a CEL expression "
    "over the event (`event.data.order_id`), compiled when saved; `{}` or a null key: the "
    "whole subscription is one sequence. null: unordered"
)

# Examples shown in the OpenAPI document (and kept in step with the README's).
_SUBSCRIPTION_ID = "3f0c9a4e-8d1b-4c55-a7e2-5b9d0e6f1a23"
_CREATE_EXAMPLE: JsonDict = {
    "endpoint_url": "https://example.com/webhooks",
    "events": ["order.paid", "order.created"],
    "description": "Orders for the warehouse",
    "headers": {"X-Team": "warehouse"},
    "timeout_seconds": 10,
    "send_trace_context": True,
    "ordering": {"key": "event.data.order_id"},
}
_READ_EXAMPLE: JsonDict = {
    "id": _SUBSCRIPTION_ID,
    "consumer_id": "0b7f5f0e-1d1a-4c87-9a55-3c4f6b2d8e01",
    "endpoint_url": "https://example.com/webhooks",
    "description": "Orders for the warehouse",
    "events": ["order.paid", "order.created"],
    "is_active": True,
    "headers": {"X-Team": "warehouse"},
    "timeout_seconds": 10,
    "created_at": "2026-11-22T10:00:00Z",
    "updated_at": "2026-11-22T10:00:00Z",
    "last_delivery_at": None,
    "failure_count": 0,
    "disabled_at": None,
    "disabled_reason": None,
    "secret_rotated_at": None,
    "send_trace_context": True,
    "ordering": {"key": "event.data.order_id"},
}


def _check_event_names(events: list[str]) -> list[str]:
    cleaned = []
    for name in events:
        if not isinstance(name, str) or not 1 <= len(name) <= 200:
            raise ValueError("event names are strings of 1 to 200 characters")
        if name not in cleaned:
            cleaned.append(name)
    return cleaned


_SEND_TRACE_CONTEXT = (
    "Send the W3C `traceparent`/`tracestate` headers, so a receiver that traces joins the "
    "trace of the change that caused the event"
)


class SubscriptionCreate(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [_CREATE_EXAMPLE]})

    endpoint_url: str = Field(max_length=2048, examples=["https://example.com/webhooks"])
    events: EventNames = Field(min_length=1, max_length=500, examples=[["order.paid"]])
    description: str | None = Field(default=None, max_length=1000)
    headers: dict[str, str] = Field(default_factory=dict)
    timeout_seconds: int = Field(default=10, ge=1, le=30)
    send_trace_context: bool = Field(default=True, description=_SEND_TRACE_CONTEXT)
    ordering: SubscriptionOrdering | None = Field(default=None, description=_ORDERING)

    _url = field_validator("endpoint_url")(check_url_form)
    _headers = field_validator("headers")(check_headers)
    _events = field_validator("events")(_check_event_names)


class SubscriptionUpdate(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"events": ["order.paid"], "timeout_seconds": 20},
                {"is_active": True},
                {"ordering": {"key": "event.data.order_id"}},
            ]
        },
    )

    endpoint_url: str | None = Field(default=None, max_length=2048)
    events: EventNames | None = Field(default=None, min_length=1, max_length=500)
    description: str | None = Field(default=None, max_length=1000)
    headers: dict[str, str] | None = None
    timeout_seconds: int | None = Field(default=None, ge=1, le=30)
    send_trace_context: bool | None = Field(default=None, description=_SEND_TRACE_CONTEXT)
    is_active: bool | None = Field(
        default=None, description="true re-enables a disabled subscription (failures reset)"
    )
    ordering: SubscriptionOrdering | None = Field(default=None, description=_ORDERING)

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


class SubscriptionRead(SubscriptionRecord):
    """The API's subscription is the NATS contract's record: one shape on both transports."""

    model_config = ConfigDict(json_schema_extra={"examples": [_READ_EXAMPLE]})

    # The HTTP API's own setting (subscriptions made over NATS keep the default).
    send_trace_context: bool = Field(default=True, description=_SEND_TRACE_CONTEXT)

    @classmethod
    def of(cls, row: Subscription) -> SubscriptionRead:
        return cls.model_validate(row, from_attributes=True)


class SubscriptionCreated(SubscriptionRead):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    **_READ_EXAMPLE,
                    "secret": "mK3k9wq1cQy8W2kz0m7xT4hJ5bVn6dRe",
                    "test_sent": True,
                    "probe": {"reachable": True, "status_code": 200, "error": None},
                }
            ]
        }
    )

    secret: str = Field(description="Shown only here and in the rotation response")
    test_sent: bool
    probe: Probe


class SubscriptionList(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={"examples": [{"data": [_READ_EXAMPLE], "next_cursor": None}]}
    )

    data: list[SubscriptionRead]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page")


class SecretRotated(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "secret": "Zq8v1n3m5b7c9x2z4l6k8j0h1g3f5d7s",
                    "valid_until": "2026-11-22T10:10:00Z",
                    "note": "Until valid_until every delivery carries two v1 signatures, one "
                    "per secret, so a receiver holding either verifies; afterwards only the "
                    "new secret signs.",
                }
            ]
        }
    )

    secret: str
    valid_until: datetime = Field(description="Until then the previous secret also signs")
    note: str


class TestQueued(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"delivery_id": "9a1e2b3c-4d5e-4f60-8a7b-1c2d3e4f5a6b", "test_sent": True}]
        }
    )

    delivery_id: uuid.UUID
    test_sent: bool
