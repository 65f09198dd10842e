"""Wire shapes of run webhooks."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator
from servicekit.contracts.webhook_hub import SubscriptionOrdering

from scraper_manager.events import RUN_EVENT_TYPES
from scraper_manager.scrapers.schemas import check_url

WEBHOOK_EXAMPLE: dict[str, Any] = {
    "id": "0b8f4c7e-2d7a-4f53-9a51-8f2f3c1d9e10",
    "url": "https://client.example/hooks",
    "events": ["run.completed", "run.failed"],
    "created_at": "2026-11-22T10:00:00Z",
}


class WebhookCreate(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"url": "https://client.example/hooks", "events": ["run.completed", "run.failed"]}
            ]
        },
    )

    url: str = Field(max_length=2048, description="Where webhook-hub POSTs the events")
    events: list[str] = Field(
        min_length=1,
        max_length=len(RUN_EVENT_TYPES),
        description=f"Any of {', '.join(RUN_EVENT_TYPES)}",
    )
    # Passed to webhook-hub, which checks them as its own API does (a refusal is a 422 naming
    # the field and entry) and keeps them: they are the hub's subscription's, not stored here.
    retry_schedule: list[str] | None = Field(
        default=None,
        max_length=20,
        description="The waits between delivery attempts (after the first fails, one retry "
        "per entry), each a duration such as 30s, 5m, 2h or 1d; at most 7 days in all. "
        "Absent: your defaults in webhook-hub, else its schedule",
        examples=[["30s", "5m", "1h"]],
    )
    timeout_seconds: int | None = Field(
        default=None,
        ge=1,
        le=30,
        description="Seconds webhook-hub waits for your answer. Absent: your default, else 10",
    )
    # Passed to webhook-hub as they are: it compiles them and refuses (422, naming the field,
    # line and column) one that does not compile.
    filter: str | None = Field(
        default=None,
        max_length=2000,
        description="A CEL expression over `event` that must be true for a run event to be sent",
        examples=['event.data.status == "failed"'],
    )
    transform: str | None = Field(
        default=None,
        max_length=2000,
        description="A CEL expression whose JSON result is sent in place of the event's `data`",
        examples=['{"run": event.data.run_id, "status": event.data.status}'],
    )

    # Passed to webhook-hub, which enforces them across its workers (and validates them too).
    rate_limit_per_second: float | None = Field(
        default=None,
        gt=0,
        le=10_000,
        allow_inf_nan=False,
        description="Deliveries per second at most (null: unlimited); held ones wait, none fail",
    )
    rate_limit_burst: int | None = Field(
        default=None,
        ge=1,
        le=100_000,
        description="How many may go at once after a quiet spell (null: one second's worth)",
    )
    ordering: SubscriptionOrdering | None = Field(
        default=None,
        description=(
            'Passed to webhook-hub: ordered delivery by key (`{"key": "<CEL>"}`; a null '
            'key: all in one sequence), e.g. `{"key": "event.data.scraper_id"}`; '
            "refused there with the expression's position"
        ),
    )

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        # webhook-hub refuses these too; refused here, they never make a round trip.
        if any(ch.isspace() or ord(ch) < 32 or 0xD800 <= ord(ch) <= 0xDFFF for ch in value):
            raise ValueError("url must not contain white space or control characters")
        return check_url(value)


class WebhookOut(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [WEBHOOK_EXAMPLE]})

    id: str = Field(description="webhook-hub's subscription id (its delivery log is keyed by it)")
    url: str
    events: list[str]
    created_at: datetime


class WebhookCreated(WebhookOut):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{**WEBHOOK_EXAMPLE, "secret": "Q2hhbmdlIG1lOiBub3QgYSByZWFsIHNlY3JldA=="}]
        }
    )

    secret: str = Field(description="Verifies the signatures (Standard Webhooks); shown once")
