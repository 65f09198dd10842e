"""W3C trace context in and out of carriers: the CloudEvents envelope (its distributed-tracing
extension attributes `traceparent`/`tracestate`), NATS headers and outgoing HTTP headers.

Always W3C, whatever `OTEL_PROPAGATORS` says: these carriers are defined by that format.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, SpanContext
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"

_w3c = TraceContextTextMapPropagator()


def current_trace_headers() -> dict[str, str]:
    """`traceparent` (and `tracestate` when there is one) of the current span; empty when no
    span is being recorded."""
    carrier: dict[str, str] = {}
    if trace.get_current_span().get_span_context().is_valid:
        _w3c.inject(carrier)
    return carrier


def trace_headers_of(span: trace.Span) -> dict[str, str]:
    """`traceparent`/`tracestate` naming `span` (empty for a span that is not recorded)."""
    carrier: dict[str, str] = {}
    if span.get_span_context().is_valid:
        _w3c.inject(carrier, context=trace.set_span_in_context(span))
    return carrier


def inject_traceparent(headers: MutableMapping[str, str]) -> None:
    """Add the current span's `traceparent`/`tracestate` to outgoing headers (a webhook), so
    a receiver that traces continues our trace. Nothing is added when nothing is traced."""
    headers.update(current_trace_headers())


def sampled(traceparent: str | None) -> bool | None:
    """The sampled flag of a W3C `traceparent`, None when there is none (or it is not one).
    Later versions may add fields after the flags, so the flags are the fourth field."""
    parts = (traceparent or "").split("-")
    if len(parts) < 4 or len(parts[1]) != 32 or len(parts[2]) != 16 or len(parts[3]) != 2:
        return None
    try:
        return bool(int(parts[3], 16) & 1)
    except ValueError:
        return None


def context_from(carrier: Mapping[str, str | None]) -> Context | None:
    """The remote parent a carrier names, or None (then a span started from it is a root)."""
    traceparent = carrier.get(TRACEPARENT)
    if not traceparent:
        return None
    found = {TRACEPARENT: traceparent}
    tracestate = carrier.get(TRACESTATE)
    if tracestate:
        found[TRACESTATE] = tracestate
    context = _w3c.extract(found)
    if not trace.get_current_span(context).get_span_context().is_valid:
        return None
    return context


def span_context_from(carrier: Mapping[str, str | None]) -> SpanContext | None:
    context = context_from(carrier)
    if context is None:
        return None
    return trace.get_current_span(context).get_span_context()


def link_to(carrier: Mapping[str, str | None]) -> list[Link]:
    """A span link to the trace a carrier names (none when it names none)."""
    span_context = span_context_from(carrier)
    return [] if span_context is None else [Link(span_context)]
