"""Wire shapes of subscriptions."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
)
from pydantic.config import JsonDict
from servicekit.contracts.webhook_hub import SubscriptionOrdering, SubscriptionRecord

from webhook_hub.delivery_engine.endpoint_policy import check_headers, check_url_form
from webhook_hub.models import Subscription
from webhook_hub.subscriptions.retry_settings import (
    MAX_RETRIES,
    MAX_TIMEOUT_SECONDS,
    MIN_TIMEOUT_SECONDS,
    InEffect,
    Source,
    check_schedule,
    check_wait,
    schedule_text,
)

EventNames = list[str]
# What PATCH (and the portal's endpoint form) may change besides `is_active`.
EDITABLE_FIELDS = (
    "endpoint_url",
    "events",
    "description",
    "headers",
    "timeout_seconds",
    "send_trace_context",
    "retry_schedule",
    "ordering",
)
_ORDERING = (
    "Ordered delivery by key: events of one key are attempted one at a time in the order "
    "they were published; a failing one holds the ones behind it. `key` is a CEL expression "
    "over the event (`event.data.order_id`), compiled when saved; `{}` or a null key: the "
    "whole subscription is one sequence. null: unordered"
)
# Fields PATCH sets to null when it names them null ("not set"; absent fields stay).
CLEARABLE_FIELDS = ("description", "timeout_seconds", "retry_schedule", "ordering")

# Examples shown in the OpenAPI document (and kept in step with the README's).
_SUBSCRIPTION_ID = "3f0c9a4e-8d1b-4c55-a7e2-5b9d0e6f1a23"
_CREATE_EXAMPLE: JsonDict = {
    "endpoint_url": "https://example.com/webhooks",
    "events": ["order.paid", "order.created"],
    "description": "Orders for the warehouse",
    "headers": {"X-Team": "warehouse"},
    "timeout_seconds": 10,
    "send_trace_context": True,
    "retry_schedule": ["5s", "1m", "10m", "1h"],
    "filter": 'event.type == "order.paid" && event.data.total > 100',
    "transform": '{"order": event.data.order_id, "amount": event.data.total}',
    "rate_limit_per_second": 20,
    "rate_limit_burst": 40,
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
    "retry_schedule": ["5s", "1m", "10m", "1h"],
    "in_effect": {
        "retry_schedule": ["5s", "1m", "10m", "1h"],
        "retry_schedule_from": "subscription",
        "timeout_seconds": 10,
        "timeout_seconds_from": "service_default",
    },
    "filter": 'event.type == "order.paid" && event.data.total > 100',
    "transform": '{"order": event.data.order_id, "amount": event.data.total}',
    "rate_limit_per_second": 20,
    "rate_limit_burst": 40,
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


# One wait of a retry schedule: "30s", "5m", "2h", "1d", "1h30m" (kept in its shortest form).
Wait = Annotated[str, AfterValidator(check_wait)]
RetrySchedule = Annotated[list[Wait], Field(max_length=MAX_RETRIES), AfterValidator(check_schedule)]
_RETRY_SCHEDULE = (
    "The waits between attempts: after the first attempt fails, one retry per entry, each "
    "a duration such as 30s, 5m, 2h or 1d; at most 20 entries and 7 days in all; [] for no "
    "retries. Null or absent: your default (PUT /webhooks/consumers/me/defaults), else the "
    "service's schedule"
)
_TIMEOUT = (
    "Seconds to wait for the endpoint's answer, 1 to 30. Null or absent: your default, else "
    "the service's (10)"
)
_TIMEOUT_READ = (
    "The timeout in effect (a number, whether the subscription sets it or not: "
    "`in_effect.timeout_seconds_from` says where it comes from)"
)
# The CEL fields (README, "Filters and transformations").
EXPRESSION_FIELDS = ("filter", "transform")
_FILTER = (
    "A CEL expression over `event` (`id`, `type`, `tenant`, `time`, `source`, `data`) that "
    "must be true for an event to be delivered; `null` for every event"
)
_TRANSFORM = (
    "A CEL expression over `event` whose JSON result is sent in place of the event's "
    "`data` (and signed as sent); `null` sends `data` as published"
)
_FILTER_EXAMPLE = 'event.type == "order.paid" && event.data.total > 100'
_TRANSFORM_EXAMPLE = '{"order": event.data.order_id, "amount": event.data.total}'

_SEND_TRACE_CONTEXT = (
    "Send the W3C `traceparent`/`tracestate` headers, so a receiver that traces joins the "
    "trace of the change that caused the event"
)


_RATE_LIMIT = (
    "Deliveries per second at most, across all of the hub's workers (retries included); "
    "deliveries beyond it wait, stored, and go out as the limit allows (none fails or is "
    "dropped for it). Null: unlimited"
)
_RATE_LIMIT_BURST = (
    "How many deliveries may go out at once after a quiet spell (the token bucket's size); "
    "null: the rate, at least 1. Only with `rate_limit_per_second`"
)
MAX_RATE_PER_SECOND = 10_000
MAX_BURST = 100_000


def _rate_field() -> Any:
    return Field(
        default=None,
        gt=0,
        le=MAX_RATE_PER_SECOND,
        allow_inf_nan=False,
        description=_RATE_LIMIT,
        examples=[20],
    )


def _burst_field() -> Any:
    return Field(default=None, ge=1, le=MAX_BURST, description=_RATE_LIMIT_BURST, examples=[40])


class SubscriptionCreate(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [_CREATE_EXAMPLE]})

    endpoint_url: str = Field(max_length=2048, examples=["https://example.com/webhooks"])
    events: EventNames = Field(min_length=1, max_length=500, examples=[["order.paid"]])
    description: str | None = Field(default=None, max_length=1000)
    headers: dict[str, str] = Field(default_factory=dict)
    timeout_seconds: int | None = Field(
        default=None, ge=MIN_TIMEOUT_SECONDS, le=MAX_TIMEOUT_SECONDS, description=_TIMEOUT
    )
    send_trace_context: bool = Field(default=True, description=_SEND_TRACE_CONTEXT)
    retry_schedule: RetrySchedule | None = Field(
        default=None, description=_RETRY_SCHEDULE, examples=[["5s", "1m", "10m", "1h"]]
    )
    filter: str | None = Field(default=None, description=_FILTER, examples=[_FILTER_EXAMPLE])
    transform: str | None = Field(
        default=None, description=_TRANSFORM, examples=[_TRANSFORM_EXAMPLE]
    )
    rate_limit_per_second: float | None = _rate_field()
    rate_limit_burst: int | None = _burst_field()
    ordering: SubscriptionOrdering | None = Field(default=None, description=_ORDERING)

    _url = field_validator("endpoint_url")(check_url_form)
    _headers = field_validator("headers")(check_headers)
    _events = field_validator("events")(_check_event_names)

    @field_validator("rate_limit_burst")
    @classmethod
    def _burst_needs_rate(cls, value: int | None, info: ValidationInfo) -> int | None:
        if value is not None and info.data.get("rate_limit_per_second") is None:
            raise ValueError("a burst needs rate_limit_per_second")
        return value


class SubscriptionUpdate(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"events": ["order.paid"], "timeout_seconds": 20},
                {"is_active": True},
                {"retry_schedule": ["30s", "5m", "1h"], "timeout_seconds": None},
                {"rate_limit_per_second": 20, "rate_limit_burst": 40},
                {"rate_limit_per_second": None},
                {"ordering": {"key": "event.data.order_id"}},
            ]
        },
    )

    endpoint_url: str | None = Field(default=None, max_length=2048)
    events: EventNames | None = Field(default=None, min_length=1, max_length=500)
    description: str | None = Field(default=None, max_length=1000)
    headers: dict[str, str] | None = None
    timeout_seconds: int | None = Field(
        default=None,
        ge=MIN_TIMEOUT_SECONDS,
        le=MAX_TIMEOUT_SECONDS,
        description=f"{_TIMEOUT}; null unsets it",
    )
    send_trace_context: bool | None = Field(default=None, description=_SEND_TRACE_CONTEXT)
    is_active: bool | None = Field(
        default=None, description="true re-enables a disabled subscription (failures reset)"
    )
    retry_schedule: RetrySchedule | None = Field(
        default=None, description=f"{_RETRY_SCHEDULE}; null unsets it"
    )
    filter: str | None = Field(default=None, description=_FILTER, examples=[_FILTER_EXAMPLE])
    transform: str | None = Field(
        default=None, description=_TRANSFORM, examples=[_TRANSFORM_EXAMPLE]
    )
    # Null here removes the limit (and its burst); absent leaves it as it is.
    rate_limit_per_second: float | None = _rate_field()
    rate_limit_burst: int | None = _burst_field()
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


class InEffectRead(BaseModel):
    """The retry schedule and timeout a subscription's next attempt uses, and where each comes
    from: `subscription` (set on it), `owner_default` (your defaults) or `service_default`."""

    retry_schedule: list[str]
    retry_schedule_from: Source
    timeout_seconds: int
    timeout_seconds_from: Source

    @classmethod
    def of(cls, effect: InEffect) -> InEffectRead:
        return cls(
            retry_schedule=schedule_text(effect.retry_schedule) or [],
            retry_schedule_from=effect.retry_schedule_from,
            timeout_seconds=effect.timeout_seconds,
            timeout_seconds_from=effect.timeout_seconds_from,
        )


def record_fields(row: Subscription, effect: InEffect) -> dict[str, Any]:
    """The NATS contract's record of a subscription (`SubscriptionRecord`'s fields): its
    columns, with the timeout in effect (the record's `timeout_seconds` is a number, as it
    has always been) and the schedule set on it as text."""
    fields = {name: getattr(row, name) for name in SubscriptionRecord.model_fields}
    fields["timeout_seconds"] = effect.timeout_seconds
    fields["retry_schedule"] = schedule_text(row.retry_schedule)
    return fields


class SubscriptionRead(SubscriptionRecord):
    """The API's subscription is the NATS contract's record: one shape on both transports."""

    model_config = ConfigDict(json_schema_extra={"examples": [_READ_EXAMPLE]})

    timeout_seconds: int = Field(description=_TIMEOUT_READ)
    # The HTTP API's own setting (subscriptions made over NATS keep the default).
    send_trace_context: bool = Field(default=True, description=_SEND_TRACE_CONTEXT)
    retry_schedule: list[str] | None = Field(
        default=None, description="The schedule set on the subscription (null: not set)"
    )
    in_effect: InEffectRead
    filter: str | None = Field(default=None, description=_FILTER)
    transform: str | None = Field(default=None, description=_TRANSFORM)

    @classmethod
    def of(cls, row: Subscription, effect: InEffect) -> SubscriptionRead:
        fields = {
            name: getattr(row, name)
            for name in cls.model_fields
            if name not in ("timeout_seconds", "retry_schedule", "in_effect")
        }
        return cls(
            **fields,
            timeout_seconds=effect.timeout_seconds,
            retry_schedule=schedule_text(row.retry_schedule),
            in_effect=InEffectRead.of(effect),
        )


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


_DEFAULTS_EXAMPLE: JsonDict = {"retry_schedule": ["1m", "10m", "1h", "6h"], "timeout_seconds": 15}


class DeliveryDefaults(BaseModel):
    """An owner's defaults for its subscriptions that set none (`PUT` replaces both: an absent
    or null field is not set, and the service's value applies)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [_DEFAULTS_EXAMPLE]})

    retry_schedule: RetrySchedule | None = Field(default=None, description=_RETRY_SCHEDULE)
    timeout_seconds: int | None = Field(
        default=None, ge=MIN_TIMEOUT_SECONDS, le=MAX_TIMEOUT_SECONDS, description=_TIMEOUT
    )


class DeliveryDefaultsRead(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    **_DEFAULTS_EXAMPLE,
                    "in_effect": {
                        "retry_schedule": ["1m", "10m", "1h", "6h"],
                        "retry_schedule_from": "owner_default",
                        "timeout_seconds": 15,
                        "timeout_seconds_from": "owner_default",
                    },
                }
            ]
        }
    )

    retry_schedule: list[str] | None = Field(description="Your default (null: not set)")
    timeout_seconds: int | None = Field(description="Your default (null: not set)")
    in_effect: InEffectRead = Field(
        description="What a subscription that sets neither gets: your defaults, else the service's"
    )
