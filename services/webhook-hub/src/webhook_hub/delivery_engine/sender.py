"""One attempt: sign, POST, read at most 4 KiB of the answer, time it.

The HTTP client is `http1.HttpClient` (asyncio and httptools), chosen by measurement in the
bench's bare sign-and-POST loops (docs/decisions/0004): it owns the kept-alive connections
per endpoint origin, their deadlines and sweeping, and the SSRF guard's address check (and
its recheck). This module makes the request (the subscription's headers, the signature, the
trace context) and turns the answer, or its absence, into the attempt's result. Redirects
are never followed; https certificates are verified.
"""

from __future__ import annotations

import time
from collections.abc import Coroutine
from datetime import UTC, datetime
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry.context import Context
from servicekit.net import AddressRefused
from servicekit.signing import sign_webhook
from servicekit.tracing import (
    TRACEPARENT,
    TRACESTATE,
    attempt_span,
    children_follow_unsampled_parents,
    context_from,
    sampled,
)
from servicekit.tracing import tracing_enabled as _tracing_enabled

from webhook_hub.delivery_engine.endpoint_policy import EndpointGuard
from webhook_hub.delivery_engine.http1 import HeaderLines, HttpClient, HttpFailure, header_lines
from webhook_hub.delivery_engine.jobs import AttemptResult, DeliveryJob, Failure, FirstAttempt

_CONTENT_TYPE = "content-type: application/json\r\n"
_TRACE_HEADERS = frozenset({TRACEPARENT, TRACESTATE})


def _custom_lines(headers: dict[str, str], traced: bool) -> str:
    """The subscription's headers as head lines; its own trace headers give way to the
    delivery's when those are sent."""
    if not headers:
        return ""
    if traced:
        headers = {k: v for k, v in headers.items() if k.lower() not in _TRACE_HEADERS}
    return header_lines(headers)


class WebhookSender:
    def __init__(
        self,
        *,
        user_agent: str,
        response_body_limit: int,
        guard: EndpointGuard | None,
        connect_timeout_seconds: float = 5.0,
        root_certificates_pem: tuple[bytes, ...] = (),
        pool_size_per_endpoint: int = 64,
    ) -> None:
        self._client = HttpClient(
            user_agent=user_agent,
            body_limit=response_body_limit,
            guard=guard,
            connect_timeout=connect_timeout_seconds,
            root_certificates_pem=root_certificates_pem,
            pool_size_per_origin=pool_size_per_endpoint,
        )
        # Decided once: the worker installs the SDK (or not) before it builds its sender.
        self._traced = _tracing_enabled()
        # A first attempt whose dispatch was not sampled would get a span that is never
        # recorded: with a parent-based sampler none is made (at 10 % sampling that was most
        # of what tracing cost an attempt).
        self._skip_unsampled = children_follow_unsampled_parents()

    async def close(self) -> None:
        await self._client.close()

    def attempt(self, job: DeliveryJob) -> Coroutine[Any, Any, AttemptResult]:
        """Send `job` once (await the answer). Untraced (no SDK): no span objects and no
        coroutine of its own, and the receiver gets the trace context the delivery keeps (the
        producer's) unless its subscription says no."""
        if self._traced and not (
            self._skip_unsampled
            and isinstance(job, FirstAttempt)
            and sampled(job.traceparent) is False
        ):
            return self._traced_attempt(job)
        # Untraced, or a first attempt in an unsampled trace: the receiver gets the context
        # the delivery keeps (the producer's, or the unsampled dispatch's).
        if job.send_trace_context:
            return self._attempt(job, job.traceparent, job.tracestate)
        return self._attempt(job, None, None)

    async def _traced_attempt(self, job: DeliveryJob) -> AttemptResult:
        """An attempt span: an event's first attempt (straight from dispatch) is a child of its
        dispatch span; any later one (a retry, or a delivery set aside and claimed) starts a
        trace of its own LINKED to the delivery's, not a child of a span that ended long ago."""
        origin = {TRACEPARENT: job.traceparent, TRACESTATE: job.tracestate}
        first = isinstance(job, FirstAttempt)
        # A first attempt without a trace to continue starts one: never the child of whatever
        # span this task happens to have current.
        token = otel_context.attach(context_from(origin) or Context()) if first else None
        try:
            with attempt_span(
                subscription_id=str(job.subscription_id),
                event_type=job.event_type,
                webhook_id=job.message_id,
                attempt=job.attempts + 1,
                origin=None if first else origin,
            ) as span:
                if job.send_trace_context:
                    ours = span.trace_headers
                    result = await self._attempt(job, ours.get(TRACEPARENT), ours.get(TRACESTATE))
                else:
                    result = await self._attempt(job, None, None)
                span.finish(
                    status_code=result.status_code,
                    outcome="succeeded" if result.succeeded else result.outcome.value,
                    error=None if result.failure is None else result.failure.value,
                )
                return result
        finally:
            if token is not None:
                otel_context.detach(token)

    async def _attempt(
        self, job: DeliveryJob, traceparent: str | None, tracestate: str | None
    ) -> AttemptResult:
        attempted_at = datetime.now(UTC)
        started = time.perf_counter()
        body = job.body
        status: int | None = None
        text: str | None = None
        error: str | None = None
        retry_after: str | None = None
        failure: Failure | None = None
        # The one place an attempt is sent and its outcome known.
        try:
            msg_id = job.message_id
            # `wire_format.signed_at(attempted_at)`, inlined: the portal shows the signature again from
            # the attempt log's time.
            timestamp = int(attempted_at.timestamp())
            # The head's lines in one string (a dict of headers rendered line by line cost
            # 2.3 µs more): the subscription's own (checked by `header_lines`), then ours,
            # whose id, timestamp and signature (hex, digits, base64) hold no line break.
            lines = (
                f"{_custom_lines(job.headers, bool(traceparent))}{_CONTENT_TYPE}"
                f"webhook-id: {msg_id}\r\nwebhook-timestamp: {timestamp}\r\n"
                f"webhook-signature: {sign_webhook(msg_id, timestamp, body, job.secrets)}\r\n"
            )
            if traceparent:
                trace = {TRACEPARENT: traceparent}
                if tracestate:
                    trace[TRACESTATE] = tracestate
                lines += header_lines(trace)
            response = await self._client.post(
                job.endpoint_url, HeaderLines(lines), body, job.timeout_seconds
            )
            status, retry_after = response.status, response.retry_after
            text = response.body.decode("utf-8", errors="replace")
            if "\x00" in text:  # text columns cannot hold it: the outcome would be unwritable
                text = text.replace("\x00", "\ufffd")
        except AddressRefused as exc:
            error, failure = f"refused: {exc}", Failure.REFUSED
        except TimeoutError:
            error, failure = f"timed out after {job.timeout_seconds} s", Failure.TIMEOUT
        except (HttpFailure, OSError, ValueError) as exc:
            error, failure = f"{type(exc).__name__}: {exc}"[:1000], Failure.NETWORK
        return AttemptResult(
            job=job,
            attempted_at=attempted_at,
            status_code=status,
            response_body=text,
            duration_ms=int((time.perf_counter() - started) * 1000),
            error=error,
            retry_after=retry_after,
            failure=failure,
        )
