"""The endpoint form: read from the posted fields, errors placed at their field. The messages
are the API's own (pydantic's and the service's), so the page and the API never disagree about
what is valid; only pydantic's wording for an empty event list is made a sentence for people."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError
from servicekit.errors import ServiceError
from starlette.datastructures import FormData

from webhook_hub.delivery_engine.endpoint_policy import EndpointRefused
from webhook_hub.errors import EndpointNotAllowed, PersonalDataNotApproved, UnknownEventTypes
from webhook_hub.models import DeliveryStatus
from webhook_hub.subscriptions.schemas import EDITABLE_FIELDS

FORM_FIELDS = EDITABLE_FIELDS
# Empty name/value rows the form offers below the endpoint's own headers.
SPARE_HEADER_ROWS = 2
# pydantic's "Value error, " prefix says nothing to a person filling a form.
_PREFIXES = ("Value error, ", "Assertion failed, ")
# pydantic's own wording where a person needs a sentence: (field, error type) -> message.
_SENTENCES = {("events", "too_short"): "Pick at least one event type."}
# datetime-local inputs send minutes, or seconds when the step allows them.
_LOCAL_FORMATS = ("%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S")


@dataclass
class EndpointForm:
    """What the person typed, kept as text so a refused form comes back as it was sent. The
    timeout is edited with the retry schedule (portal/retries.py), not here."""

    endpoint_url: str = ""
    events: list[str] = field(default_factory=list)
    description: str = ""
    headers: list[tuple[str, str]] = field(default_factory=list)
    send_trace_context: bool = True

    @classmethod
    def read(cls, form: FormData) -> EndpointForm:
        names = [str(v).strip() for v in form.getlist("header_name")]
        values = [str(v).strip() for v in form.getlist("header_value")]
        rows = [(name, value) for name, value in zip(names, values, strict=False) if name or value]
        return cls(
            endpoint_url=str(form.get("endpoint_url", "")).strip(),
            events=[str(v) for v in form.getlist("events")],
            description=str(form.get("description", "")).strip(),
            headers=rows,
            # An unticked checkbox is not posted at all.
            send_trace_context="send_trace_context" in form,
        )

    def body(self) -> dict[str, Any]:
        """The API's request body (pydantic validates it, as it does the API's JSON)."""
        return {
            "endpoint_url": self.endpoint_url,
            "events": self.events,
            "description": self.description or None,
            "headers": self.header_dict(),
            "send_trace_context": self.send_trace_context,
        }

    def header_dict(self) -> dict[str, str]:
        if any(not name for name, _ in self.headers):
            raise EndpointRefused("every header needs a name")
        if len({name.lower() for name, _ in self.headers}) < len(self.headers):
            raise EndpointRefused("each header name may appear once")
        return dict(self.headers)

    def header_rows(self) -> list[tuple[str, str]]:
        return [*self.headers, *[("", "")] * SPARE_HEADER_ROWS]


def _message(text: str) -> str:
    for prefix in _PREFIXES:
        if text.startswith(prefix):
            text = text[len(prefix) :]
    return text[:1].upper() + text[1:]


def subscription_form_errors(
    exc: ValidationError | ServiceError | EndpointRefused,
) -> dict[str, str]:
    """Field name -> the first message about it; `form` for what belongs to no field."""
    if isinstance(exc, EndpointRefused):
        return {"headers": _message(str(exc))}
    if isinstance(exc, UnknownEventTypes | PersonalDataNotApproved):
        return {"events": exc.message}
    if isinstance(exc, EndpointNotAllowed):
        return {"endpoint_url": exc.message}
    if isinstance(exc, ServiceError):
        return {"form": exc.message}
    errors: dict[str, str] = {}
    for error in exc.errors():
        loc = error["loc"]
        field_name = str(loc[0]) if loc and str(loc[0]) in FORM_FIELDS else "form"
        sentence = _SENTENCES.get((field_name, error["type"]))
        errors.setdefault(field_name, sentence or _message(str(error["msg"])))
    return errors


def parse_local_time(text: str) -> datetime | None:
    """A `datetime-local` value read as UTC (the portal shows every time in UTC); None when
    empty or not such a value."""
    for layout in _LOCAL_FORMATS:
        try:
            return datetime.strptime(text.strip(), layout).replace(tzinfo=UTC)
        except ValueError:
            continue
    return None


def local_time_value(value: datetime | None) -> str:
    """The `datetime-local` input's value for a moment, in UTC."""
    return "" if value is None else value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M")


def parse_status_filter(text: str) -> DeliveryStatus | None:
    """The delivery log's status filter from its select: a status, or None (no filter) for
    the empty "Any status" and for any text that is no status."""
    try:
        return DeliveryStatus(text.strip().lower())
    except ValueError:
        return None


# The most deliveries one "Retry selected" takes: a page of the log is 50.
MAX_SELECTED = 200


def parse_delivery_ids(values: list[str | Any]) -> list[uuid.UUID]:
    """The ticked deliveries' ids, each once; values that are no id are left out (a form
    posts only what the page rendered, so they can only come from elsewhere)."""
    ids: list[uuid.UUID] = []
    for value in values[:MAX_SELECTED]:
        try:
            parsed = uuid.UUID(str(value))
        except ValueError:
            continue
        if parsed not in ids:
            ids.append(parsed)
    return ids


# --- ordered delivery (issue 32, item 3) ------------------------------------------------------

ORDERING_MODES = ("none", "sequence", "key")


@dataclass
class OrderingForm:
    """The ordering editor as typed: `mode` none (unordered), sequence (the whole
    subscription one sequence) or key (by the CEL expression `key`)."""

    mode: str = "none"
    key: str = ""

    @classmethod
    def of(cls, ordering: Mapping[str, Any] | None) -> OrderingForm:
        if ordering is None:
            return cls()
        key = ordering.get("key")
        return cls("key", key) if isinstance(key, str) and key else cls("sequence")

    @classmethod
    def read(cls, form: FormData) -> OrderingForm:
        mode = str(form.get("mode", "none"))
        return cls(mode if mode in ORDERING_MODES else "none", str(form.get("key", "")).strip())

    def body(self) -> dict[str, Any]:
        """The API's PATCH body; ValueError (shown at the key) when "by key" has no key."""
        if self.mode == "none":
            return {"ordering": None}
        if self.mode == "sequence":
            return {"ordering": {"key": None}}
        if not self.key:
            raise ValueError("Write a key expression, such as event.data.order_id.")
        return {"ordering": {"key": self.key}}


def expression_error_text(exc: Exception) -> str:
    """What the editor says of a refused ordering: the 422's message (an expression's names
    its line and column), a field check's first message, or the form's own."""
    if isinstance(exc, ValidationError):
        return _message(str(exc.errors()[0].get("msg", "not a valid ordering")))
    if isinstance(exc, ServiceError):
        return exc.message
    return str(exc)
