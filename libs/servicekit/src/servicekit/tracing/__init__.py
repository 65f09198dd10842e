"""OpenTelemetry for every service: set-up from the standard `OTEL_*` variables, the
maintained instrumentations, trace context across NATS, and our own spans.

For webhook-hub's delivery engine (see the README's "Tracing" section):

    with dispatch_span(event):                       # continues the producer's trace
        with attempt_span(subscription_id=..., event_type=event.type,
                          webhook_id=..., attempt=1) as attempt:
            headers.update(attempt.trace_headers)     # the receiver sees our trace id
            ...
            attempt.finish(status_code=resp.status, outcome="succeeded")
        origin = current_trace_headers()              # keep with the delivery for retries

    # hours later, a retry: its own trace, LINKED to the original one
    with attempt_span(..., attempt=2, origin=stored_origin) as attempt: ...
"""

from servicekit.tracing.propagation import (
    TRACEPARENT,
    TRACESTATE,
    context_from,
    current_trace_headers,
    inject_traceparent,
    link_to,
    sampled,
    trace_headers_of,
)
from servicekit.tracing.setup import (
    active_tracer,
    build_tracer_provider,
    children_follow_unsampled_parents,
    configure_tracing,
    install_tracer_provider,
    instrument_engine,
    instrument_fastapi,
    shutdown_tracing,
    tracing_enabled,
    tracing_requested,
)
from servicekit.tracing.spans import (
    AttemptSpan,
    attempt_span,
    consume_span,
    dispatch_span,
    event_span,
    outbox_record_span,
    publish_span,
    tracer,
)

__all__ = [
    "TRACEPARENT",
    "TRACESTATE",
    "AttemptSpan",
    "active_tracer",
    "attempt_span",
    "build_tracer_provider",
    "children_follow_unsampled_parents",
    "configure_tracing",
    "consume_span",
    "context_from",
    "current_trace_headers",
    "dispatch_span",
    "event_span",
    "inject_traceparent",
    "install_tracer_provider",
    "instrument_engine",
    "instrument_fastapi",
    "link_to",
    "outbox_record_span",
    "publish_span",
    "sampled",
    "shutdown_tracing",
    "trace_headers_of",
    "tracer",
    "tracing_enabled",
    "tracing_requested",
]
