"""Wire shapes of events sent by producers over HTTP."""

from __future__ import annotations

import uuid
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, WithJsonSchema
from servicekit.errors import UnprocessableEntity
from servicekit.events.envelope import EVENT_TYPE_PATTERN
from servicekit.web.errors import validation_refusal


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


# Events in one batch at most: a batch is one transaction, and 500 small events are about as
# much as a request body of 256 KiB holds.
MAX_BATCH_EVENTS = 500


class BatchedEvent(EventSubmission):
    """An event of a batch: the single form's body, with its `Idempotency-Key` inside."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "type": "invoice.paid",
                    "data": {"id": "inv_1001", "total": 99.5},
                    "idempotency_key": "inv_1001-paid",
                }
            ]
        },
    )

    idempotency_key: str | None = Field(
        default=None,
        max_length=200,
        description="As the single form's `Idempotency-Key` header: the same key from the same "
        "owner within the window answers the first event's id and records nothing new",
    )


def parse_batched_event(raw: object) -> BatchedEvent | UnprocessableEntity:
    """An event of a batch, or the refusal the single form would answer for it sent alone
    (the same messages, located under `body`)."""
    try:
        return BatchedEvent.model_validate(raw)
    except ValidationError as exc:
        errors = [{**error, "loc": ("body", *error["loc"])} for error in exc.errors()]
        return validation_refusal(errors)


class EventBatch(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "events": [
                        {"type": "invoice.paid", "data": {"id": "inv_1001", "total": 99.5}},
                        {
                            "type": "invoice.paid",
                            "data": {"id": "inv_1002", "total": 12},
                            "idempotency_key": "inv_1002-paid",
                        },
                    ]
                }
            ]
        },
    )

    # Read as any JSON values, each then parsed on its own (`parse_batched_event`): one
    # malformed event is refused alone, not the batch. Documented as the events they must be.
    events: Annotated[
        list[Any],
        WithJsonSchema(
            {
                "type": "array",
                "items": BatchedEvent.model_json_schema(),
                "minItems": 1,
                "maxItems": MAX_BATCH_EVENTS,
            }
        ),
    ] = Field(min_length=1, max_length=MAX_BATCH_EVENTS)


class BatchEventResult(BaseModel):
    """One event's answer, in the batch's order: `accepted` (202, its new id), `duplicate`
    (202, the id the key's first event got; nothing recorded) or `refused` (the status, code
    and message the single form answers, with its other members, e.g. `errors`)."""

    model_config = ConfigDict(
        extra="allow",
        json_schema_extra={
            "examples": [
                {"result": "accepted", "status": 202, "id": "5d6e7f80-9a1b-4c2d-8e3f-4a5b6c7d8e9f"},
                {
                    "result": "refused",
                    "status": 422,
                    "code": "event_data_invalid",
                    "error": "data does not match the schema of 'invoice.paid': "
                    "data.total: 'x' is not of type 'number'",
                    "errors": ["data.total: 'x' is not of type 'number'"],
                },
            ]
        },
    )

    result: Literal["accepted", "duplicate", "refused"]
    status: int
    id: uuid.UUID | None = None
    code: str | None = None
    error: str | None = None


class EventBatchResults(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "results": [
                        {
                            "result": "accepted",
                            "status": 202,
                            "id": "5d6e7f80-9a1b-4c2d-8e3f-4a5b6c7d8e9f",
                        },
                        {
                            "result": "duplicate",
                            "status": 202,
                            "id": "0b1c2d3e-4f50-4617-8829-3a4b5c6d7e8f",
                        },
                        {
                            "result": "refused",
                            "status": 403,
                            "code": "event_type_not_owned",
                            "error": "Event type 'order.paid' is not a type you registered "
                            "(POST /webhooks/event-types); services' types need an operator key",
                        },
                    ],
                    "accepted": 1,
                    "duplicates": 1,
                    "refused": 1,
                }
            ]
        }
    )

    results: list[BatchEventResult]
    accepted: int = Field(description="events recorded by this batch")
    duplicates: int = Field(description="events whose key was held: the first event's id")
    refused: int
