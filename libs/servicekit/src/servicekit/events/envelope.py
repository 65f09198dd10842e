"""The CloudEvents 1.0 structured JSON envelope that travels on `events.<type>`."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from uuid_utils.compat import uuid7

EVENT_TYPE_PATTERN = r"^[a-z][a-z0-9_-]*(\.[a-z][a-z0-9_-]*)+$"
SUBJECT_PREFIX = "events."


def subject_for(event_type: str) -> str:
    return SUBJECT_PREFIX + event_type


def new_event_id() -> uuid.UUID:
    """A UUIDv7 (RFC 9562): time-ordered, so the consumers' tables keyed by event id grow at
    the end of their indexes instead of at random pages. Measured in webhook-hub (COPY of
    1,000-row batches into `deliveries`, unique on event and subscription): 16 to 22 µs of
    PostgreSQL's CPU per delivery against 22 to 23 with random (v4) ids."""
    return uuid7()


class CloudEvent(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)

    specversion: Literal["1.0"] = "1.0"
    id: uuid.UUID = Field(default_factory=new_event_id)
    source: str = Field(min_length=1)
    type: str = Field(pattern=EVENT_TYPE_PATTERN)
    time: datetime = Field(default_factory=lambda: datetime.now(UTC))
    datacontenttype: Literal["application/json"] = "application/json"
    data: dict[str, Any]
    # Extension attribute: the one consumer this event belongs to, when it belongs to one.
    tenant: str | None = None
    # CloudEvents distributed-tracing extension: the W3C context of the span that recorded the
    # event, so consumers continue the producer's trace. Absent when nothing was traced.
    traceparent: str | None = None
    tracestate: str | None = None

    @property
    def subject(self) -> str:
        return subject_for(self.type)

    def to_json(self) -> bytes:
        return self.model_dump_json(exclude_none=True).encode()

    @classmethod
    def from_json(cls, raw: bytes | str) -> CloudEvent:
        return cls.model_validate_json(raw)
