"""One attempt: sign, POST, read at most 4 KiB of the answer, time it.

The HTTP client is `http1` (asyncio and httptools), chosen by measurement in the bench's bare
sign-and-POST loops (see the README's Performance). Each endpoint origin (scheme, host, port)
has a pool of its own kept-alive connections; with the SSRF guard on, the pool connects to
the address the guard checked, so DNS cannot change between the check and the connect. The
address is checked again after `RECHECK_SECONDS`; a new answer gets a new pool. Redirects are
never followed; https certificates are verified.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, urlsplit

from opentelemetry import context as otel_context
from opentelemetry.context import Context
from servicekit.net import AddressRefused, resolve_checked
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
from webhook_hub.delivery_engine.http1 import (
    IDLE_SECONDS,
    Deadlines,
    HttpFailure,
    OriginPool,
    header_lines,
    tls_context,
)
from webhook_hub.delivery_engine.jobs import AttemptResult, DeliveryJob, Failure, FirstAttempt

# How long a checked address is trusted before the name is looked up and checked again.
RECHECK_SECONDS = 60.0
# Distinct endpoint origins with a pool at once; the least recently used go first.
MAX_ORIGINS = 4096
# Endpoint URLs whose origin and request target are remembered (parsed once).
MAX_TARGETS = 16384
# Left as they are in a request target: the reserved characters and `%` (escapes kept).
_TARGET_SAFE = "!#$%&'()*+,/:;=?@[]~"


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


@dataclass
class _Origin:
    pool: OriginPool
    checked_at: float


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
        self._user_agent = user_agent
        self._limit = response_body_limit
        self._guard = guard
        self._connect_timeout = connect_timeout_seconds
        self._tls = tls_context(root_certificates_pem)
        self._pool_size = pool_size_per_endpoint
        # (scheme, host, port) -> its pool; insertion order is use order (an LRU).
        self._origins: dict[tuple[str, str, int], _Origin] = {}
        # endpoint URL -> (its origin, the request target)
        self._targets: dict[str, tuple[tuple[str, str, int], str]] = {}
        self._swept = time.monotonic()
        # One timeout check for every pool's exchanges.
        self._deadlines = Deadlines()
        # Decided once: the worker installs the SDK (or not) before it builds its sender.
        self._traced = _tracing_enabled()
        # A first attempt whose dispatch was not sampled would get a span that is never
        # recorded: with a parent-based sampler none is made (at 10 % sampling that was most
        # of what tracing cost an attempt).
        self._skip_unsampled = children_follow_unsampled_parents()

    async def close(self) -> None:
        origins, self._origins = list(self._origins.values()), {}
        for origin in origins:
            origin.pool.close()

    def _target(self, url: str) -> tuple[tuple[str, str, int], str]:
        known = self._targets.get(url)
        if known is None:
            parts = urlsplit(url)
            host = parts.hostname or ""
            port = parts.port or (443 if parts.scheme == "https" else 80)
            target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
            # Percent-encoded as URL parsers do (UTF-8 for the rest; escapes kept as they are).
            target = quote(target, safe=_TARGET_SAFE)
            if len(self._targets) >= MAX_TARGETS:
                self._targets.clear()
            known = self._targets[url] = ((parts.scheme, host, port), target)
        return known

    def _ready_pool(self, key: tuple[str, str, int]) -> OriginPool | None:
        """The origin's pool when it has one whose address needs no check now (no coroutine:
        this is every attempt but the first to an origin and one a minute)."""
        now = time.monotonic()
        if now - self._swept >= IDLE_SECONDS:
            self._sweep(now)
        origin = self._origins.get(key)
        if origin is not None and (
            self._guard is None or now - origin.checked_at < RECHECK_SECONDS
        ):
            self._origins[key] = self._origins.pop(key)  # most recently used last
            return origin.pool
        return None

    async def _checked_pool(self, url: str, key: tuple[str, str, int]) -> OriginPool:
        """The origin's pool of kept-alive connections when `_ready_pool` has none: to the
        address checked now when guarded. Refuses (`AddressRefused`) what the guard refuses."""
        now = time.monotonic()
        address: str | None = None
        if self._guard is not None:
            checked = await resolve_checked(url, self._guard.policy, resolver=self._guard.resolver)
            address = str(checked)
        # Other attempts may have checked the origin while this one waited: one pool stays,
        # and one displaced is closed (its connections would otherwise stay open, unused).
        origin = self._origins.pop(key, None)
        if origin is not None and origin.pool.address == address:
            origin.checked_at = max(origin.checked_at, now)
        else:
            if origin is not None:
                origin.pool.close()
            scheme, host, port = key
            pool = OriginPool(
                scheme=scheme,
                host=host,
                port=port,
                address=address,
                user_agent=self._user_agent,
                connect_timeout=self._connect_timeout,
                tls=self._tls,
                max_idle=self._pool_size,
                body_limit=self._limit,
                deadlines=self._deadlines,
            )
            origin = _Origin(pool, now)
        self._origins[key] = origin
        while len(self._origins) > MAX_ORIGINS:
            self._origins.pop(next(iter(self._origins))).pool.close()
        return origin.pool

    def _sweep(self, now: float) -> None:
        """Close connections idle too long in every pool, the quiet ones included."""
        self._swept = now
        loop_now = asyncio.get_running_loop().time()
        for origin in self._origins.values():
            origin.pool.expire(loop_now)

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
            # `jobs.signed_at(attempted_at)`, inlined: the portal shows the signature again from
            # the attempt log's time.
            timestamp = int(attempted_at.timestamp())
            # The head's lines in one string (a dict of headers rendered line by line cost
            # 2.3 µs more): the subscription's own, then ours.
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
            key, target = self._target(job.endpoint_url)
            pool = self._ready_pool(key) or await self._checked_pool(job.endpoint_url, key)
            response = await pool.post(target, lines, body, job.timeout_seconds)
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
