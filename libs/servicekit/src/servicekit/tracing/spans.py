"""The spans no maintained instrumentation makes: the outbox, the relay, JetStream consumers,
and (for webhook-hub's engine) dispatch and delivery attempts.

Each helper costs one flag read when tracing is off (see `tracing_enabled`): hot loops such
as the relay publish hundreds of events a batch.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode
from opentelemetry.util.types import AnyValue

from servicekit.tracing.propagation import (
    TRACEPARENT,
    TRACESTATE,
    context_from,
    current_trace_headers,
    link_to,
    trace_headers_of,
)
from servicekit.tracing.setup import active_tracer, tracing_enabled

if TYPE_CHECKING:
    import uuid

# For callers' own spans (the crawler, GraphQL): the API's proxy, which follows the provider
# installed later. Our helpers below use `active_tracer()`, the SDK's own.
tracer = trace.get_tracer("servicekit")

MESSAGING_SYSTEM = "nats"


# Described here, by what the spans read, rather than named from `servicekit.events`: the
# events package stands on tracing (the relay and consumers open these spans).
class TracedEvent(Protocol):
    """What tracing reads of an event: either envelope type."""

    @property
    def id(self) -> uuid.UUID: ...
    @property
    def type(self) -> str: ...
    @property
    def traceparent(self) -> str | None: ...
    @property
    def tracestate(self) -> str | None: ...


class PublishedEvent(TracedEvent, Protocol):
    """An event the relay publishes: a `CloudEvent`, which names its NATS subject."""

    @property
    def subject(self) -> str: ...


def _event_carrier(event: TracedEvent) -> dict[str, str | None]:
    return {TRACEPARENT: event.traceparent, TRACESTATE: event.tracestate}


def _parent_of(event: TracedEvent) -> Context:
    """The producer's context, or an empty one: a new trace, never whatever span happens to
    be current in the consuming task."""
    return context_from(_event_carrier(event)) or Context()


@contextmanager
def outbox_record_span(event_type: str, event_id: str) -> Iterator[dict[str, str]]:
    """Around writing an outbox row; yields the trace headers the row keeps for the envelope
    (empty when tracing is off)."""
    if not tracing_enabled():
        yield {}
        return
    with active_tracer().start_as_current_span(
        f"outbox record {event_type}",
        kind=SpanKind.PRODUCER,
        attributes={
            "messaging.system": MESSAGING_SYSTEM,
            "messaging.operation.type": "create",
            "messaging.destination.name": "events." + event_type,
            "messaging.message.id": event_id,
            "cloudevents.event_type": event_type,
            "cloudevents.event_id": event_id,
        },
    ):
        yield current_trace_headers()


@contextmanager
def publish_span(event: PublishedEvent) -> Iterator[dict[str, str]]:
    """The relay's publish of one event, a child of its outbox record span when the envelope
    names one; yields the trace headers for the NATS message."""
    if not tracing_enabled():
        yield {}
        return
    with active_tracer().start_as_current_span(
        f"publish {event.subject}",
        context=context_from(_event_carrier(event)),
        kind=SpanKind.PRODUCER,
        attributes={
            "messaging.system": MESSAGING_SYSTEM,
            "messaging.operation.type": "publish",
            "messaging.destination.name": event.subject,
            "messaging.message.id": str(event.id),
            "cloudevents.event_type": event.type,
            "cloudevents.event_id": str(event.id),
        },
    ):
        yield current_trace_headers()


@contextmanager
def consume_span(consumer: str, events: Sequence[TracedEvent]) -> Iterator[Span | None]:
    """A consumer processing a batch. One event: a child of its producer's span (a new trace
    when the envelope names none). Several: one span linked to each producer, as the messaging
    conventions say for batches; per-event work continues each trace with `event_span`."""
    if not tracing_enabled() or not events:
        yield None
        return
    parent = _parent_of(events[0]) if len(events) == 1 else Context()
    links: list[Link] = []
    if len(events) > 1:
        for event in events:
            links.extend(link_to(_event_carrier(event)))
    with active_tracer().start_as_current_span(
        f"process {consumer}",
        context=parent,
        kind=SpanKind.CONSUMER,
        links=links,
        attributes={
            "messaging.system": MESSAGING_SYSTEM,
            "messaging.operation.type": "process",
            "messaging.consumer.group.name": consumer,
            "messaging.batch.message_count": len(events),
        },
    ) as span:
        yield span


@contextmanager
def event_span(name: str, event: TracedEvent) -> Iterator[Span | None]:
    """A span for work on one event, continuing its producer's trace (a new trace when the
    envelope names none). webhook-hub's dispatch of an event is one of these."""
    if not tracing_enabled():
        yield None
        return
    with active_tracer().start_as_current_span(
        name,
        context=_parent_of(event),
        kind=SpanKind.CONSUMER,
        attributes={
            "messaging.system": MESSAGING_SYSTEM,
            "messaging.operation.type": "process",
            "cloudevents.event_type": event.type,
            "cloudevents.event_id": str(event.id),
        },
    ) as span:
        yield span


def dispatch_span(event: TracedEvent) -> AbstractContextManager[Span | None]:
    """webhook-hub's dispatch of one event to its subscriptions."""
    return event_span(f"dispatch {event.type}", event)


@dataclass
class AttemptSpan:
    """One delivery attempt's span; `finish` records how it went (no-op when untraced)."""

    span: Span | None

    @property
    def trace_headers(self) -> dict[str, str]:
        """This attempt's `traceparent` for the outgoing request (see `inject_traceparent`)."""
        if self.span is None:
            return {}
        return trace_headers_of(self.span)

    def finish(self, *, status_code: int | None, outcome: str, error: str | None = None) -> None:
        if self.span is None:
            return
        self.span.set_attribute("webhook.outcome", outcome)
        if status_code is not None:
            self.span.set_attribute("http.response.status_code", status_code)
        if error is not None:
            self.span.set_attribute("error.type", error)
        if outcome != "succeeded":
            self.span.set_status(Status(StatusCode.ERROR, outcome))


@contextmanager
def attempt_span(
    *,
    subscription_id: str,
    event_type: str,
    webhook_id: str,
    attempt: int,
    origin: Mapping[str, str | None] | None = None,
) -> Iterator[AttemptSpan]:
    """One delivery attempt.

    The first attempt (`origin` None) is a child of the current span (the dispatch). A retry,
    run minutes or hours later, is the root of a trace of its own with a span LINK to `origin`
    (the trace headers stored with the delivery: the dispatch's or the first attempt's), not
    the child of a span that ended long ago.
    """
    if not tracing_enabled():
        yield AttemptSpan(None)
        return
    attributes: dict[str, AnyValue] = {
        "webhook.subscription_id": subscription_id,
        "cloudevents.event_type": event_type,
        "webhook.id": webhook_id,
        "webhook.attempt": attempt,
    }
    if origin is None:
        with active_tracer().start_as_current_span(
            f"deliver {event_type}", kind=SpanKind.CLIENT, attributes=attributes
        ) as span:
            yield AttemptSpan(span)
        return
    with active_tracer().start_as_current_span(
        f"deliver {event_type} (retry)",
        # An empty context: a new trace, whatever span happens to be current.
        context=Context(),
        kind=SpanKind.CLIENT,
        links=link_to(origin),
        attributes=attributes,
    ) as span:
        yield AttemptSpan(span)
