"""The CloudEvents 1.0 structured JSON envelope that travels on `events.<type>`."""

from __future__ import annotations

import functools
import re
import uuid
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

import msgspec
from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic_core import to_json
from uuid_utils.compat import uuid7

EVENT_TYPE_PATTERN = r"^[a-z][a-z0-9_-]*(\.[a-z][a-z0-9_-]*)+$"
# The same for Python's `re` (msgspec's), whose `$` also matches before a final line break.
_EVENT_TYPE_PATTERN_PY = EVENT_TYPE_PATTERN.removesuffix("$") + r"\Z"
# Consumers store the type (webhook-hub: 200 characters at most).
EVENT_TYPE_MAX_LENGTH = 200
# W3C trace context, version 00 (55 characters, which is what consumers store); a context
# that is not well formed is ignored, as the W3C asks, rather than the event refused.
_TRACEPARENT = re.compile(r"[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}")
TRACESTATE_MAX_LENGTH = 512
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
    type: str = Field(pattern=EVENT_TYPE_PATTERN, max_length=EVENT_TYPE_MAX_LENGTH)
    time: datetime = Field(default_factory=lambda: datetime.now(UTC))
    datacontenttype: Literal["application/json"] = "application/json"
    data: dict[str, Any]
    # Extension attribute: the one consumer this event belongs to, when it belongs to one.
    tenant: str | None = None
    # CloudEvents distributed-tracing extension: the W3C context of the span that recorded the
    # event, so consumers continue the producer's trace. Absent when nothing was traced.
    traceparent: str | None = None
    tracestate: str | None = None

    @field_validator("time")
    @classmethod
    def _time_in_utc(cls, value: datetime) -> datetime:
        if not in_utc_range(value):
            raise ValueError("the time cannot be written in UTC (out of range)")
        return value

    @field_validator("traceparent")
    @classmethod
    def _traceparent_or_none(cls, value: str | None) -> str | None:
        return value if value is None or well_formed_traceparent(value) else None

    @field_validator("tracestate")
    @classmethod
    def _tracestate_or_none(cls, value: str | None) -> str | None:
        return value if value is None or well_formed_tracestate(value) else None

    @property
    def subject(self) -> str:
        return subject_for(self.type)

    def to_json(self) -> bytes:
        return self.model_dump_json(exclude_none=True).encode()

    @classmethod
    def from_json(cls, raw: bytes | str) -> CloudEvent:
        return cls.model_validate_json(raw)


def in_utc_range(moment: datetime) -> bool:
    """Whether `moment` can be written in UTC (a time in year 1 or 9999 may fall outside)."""
    if 1 < moment.year < 9999:
        return True
    try:
        moment.astimezone(UTC)
    except OverflowError:
        return False
    return True


def well_formed_traceparent(value: str) -> bool:
    return _TRACEPARENT.fullmatch(value) is not None and not value.startswith("ff")


def well_formed_tracestate(value: str) -> bool:
    return len(value) <= TRACESTATE_MAX_LENGTH and value.isascii() and value.isprintable()


class RawCloudEvent(msgspec.Struct, frozen=True):
    """A CloudEvent read to be passed on: the envelope's attributes decoded and checked as
    `CloudEvent` checks them, its `data` (a JSON object) kept as the producer's bytes.

    webhook-hub's dispatch sends `data` on and stores it, and never looks inside: reading it
    into Python objects and writing it out again cost 3.6 to 3.7 µs per event of the
    bench's (233 bytes), 6.7 to 6.9 for an order's (447 bytes); this way 1.9 to 2.0 and 2.3
    (msgspec, against pydantic and `to_json`). Kept as sent, a number such as `1e400` stays
    a JSON number (read into a float and written out, it became `Infinity`, which no JSON
    reader, PostgreSQL's included, accepts)."""

    source: Annotated[str, msgspec.Meta(min_length=1)]
    # Its pattern is checked in `from_json`, once per type (`_is_event_type`): msgspec ran
    # the regular expression on every event (about 1 µs of the bench's event's 3.7).
    type: Annotated[str, msgspec.Meta(max_length=EVENT_TYPE_MAX_LENGTH)]
    id: uuid.UUID
    time: datetime
    data: msgspec.Raw
    specversion: Literal["1.0"] = "1.0"
    datacontenttype: Literal["application/json"] = "application/json"
    tenant: str | None = None
    traceparent: str | None = None
    tracestate: str | None = None

    @classmethod
    def from_json(cls, raw: bytes | str) -> RawCloudEvent:
        """The event in `raw`; ValueError (pydantic's ValidationError) when it is not one.

        Takes what `CloudEvent.from_json` takes, and reads the same: an envelope msgspec
        refuses (an id as a URN, a date without a time, a missing id) is read by `CloudEvent`
        instead, its data written out again; one that `CloudEvent`'s further rules may change
        or refuse (a type not of the `<resource>.<action>` form, a trace context not well
        formed, a time at the calendar's ends, data larger than 4,300 bytes or with more than
        200 brackets, which may hide nesting past pydantic's 200 levels or an integer past
        Python's 4,300 digits) is checked by `CloudEvent` too, its data kept as sent."""
        try:
            event = _RAW_EVENT.decode(raw)
        except (msgspec.DecodeError, RecursionError):
            return cls._read_by_pydantic(raw, None)
        data = bytes(event.data)
        # An object, and text: msgspec skips over the value without decoding its strings.
        if data[:1] != b"{" or not (data.isascii() or _is_utf8(data)):
            return cls._read_by_pydantic(raw, None)
        traceparent, tracestate = event.traceparent, event.tracestate
        if (
            not _is_event_type(event.type)
            or len(data) > 4300
            or data.count(b"{") + data.count(b"[") > 200
            or not in_utc_range(event.time)
            or (traceparent is not None and not well_formed_traceparent(traceparent))
            or (tracestate is not None and not well_formed_tracestate(tracestate))
        ):
            return cls._read_by_pydantic(raw, data)
        return event

    @classmethod
    def _read_by_pydantic(cls, raw: bytes | str, data: bytes | None) -> RawCloudEvent:
        """`raw` read by `CloudEvent`; its data `data` when given (read already), else
        `CloudEvent`'s written out again."""
        event = CloudEvent.from_json(raw)
        return cls(
            source=event.source,
            type=event.type,
            id=event.id,
            time=event.time,
            # Non-finite floats as null: JSON has no other way to write them.
            data=msgspec.Raw(data or to_json(event.data, inf_nan_mode="null")),
            tenant=event.tenant,
            traceparent=event.traceparent,
            tracestate=event.tracestate,
        )


_RAW_EVENT = msgspec.json.Decoder(RawCloudEvent)
_EVENT_TYPE = re.compile(_EVENT_TYPE_PATTERN_PY)


@functools.lru_cache(maxsize=1024)
def _is_event_type(name: str) -> bool:
    """`name` has the form of an event type (a handful of names make nearly every event)."""
    return _EVENT_TYPE.search(name) is not None


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode()
    except UnicodeDecodeError:
        return False
    return True
