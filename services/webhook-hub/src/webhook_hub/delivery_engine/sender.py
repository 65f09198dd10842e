"""One attempt: sign, POST, read at most 4 KiB of the answer, time it.

The HTTP client is pyreqwest (Rust's reqwest and hyper), chosen by measurement: the bench's
bare sign-and-POST loop costs it well under half the CPU per request aiohttp's does. Each
endpoint origin (scheme, host, port) has a client of its own, so a keep-alive pool of its own;
with the SSRF guard on, that client is pinned (reqwest's static resolution) to the address
the guard checked, so the connection goes to that address and DNS cannot change between the
check and the connect. The pin is checked again after `RECHECK_SECONDS`; a new answer gets a
new client. Redirects are never followed; https certificates are verified.
"""

from __future__ import annotations

import time
from collections.abc import Coroutine
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from opentelemetry import context as otel_context
from opentelemetry.context import Context
from pyreqwest.client import Client, ClientBuilder
from pyreqwest.exceptions import PyreqwestError
from servicekit.net import AddressRefused, resolve_checked
from servicekit.signing import webhook_headers
from servicekit.tracing import (
    TRACEPARENT,
    TRACESTATE,
    attempt_span,
    children_follow_unsampled_parents,
    context_from,
    sampled,
)
from servicekit.tracing import tracing_enabled as _tracing_enabled

from webhook_hub.delivery_engine.decisions import outcome_of
from webhook_hub.delivery_engine.jobs import AttemptResult, DeliveryJob, Failure
from webhook_hub.subscriptions.endpoint_policy import EndpointGuard

# How long a checked address is trusted before the name is looked up and checked again.
RECHECK_SECONDS = 60.0
# Distinct endpoint origins with a client at once; the least recently used go first.
MAX_CLIENTS = 4096
# Answers without a body, whatever their headers say.
_NO_BODY = frozenset({204, 304})


@dataclass
class _Origin:
    client: Client
    address: str | None  # the checked address it is pinned to (None: not guarded)
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
        self._connect_timeout = timedelta(seconds=connect_timeout_seconds)
        self._roots = root_certificates_pem
        self._pool_size = pool_size_per_endpoint
        # (scheme, host, port) -> its client; insertion order is use order (an LRU).
        self._origins: dict[tuple[str, str, int], _Origin] = {}
        self._timeouts: dict[int, timedelta] = {}
        # Decided once: the worker installs the SDK (or not) before it builds its sender.
        self._traced = _tracing_enabled()
        # A first attempt whose dispatch was not sampled would get a span that is never
        # recorded: with a parent-based sampler none is made (at 10 % sampling that was most
        # of what tracing cost an attempt).
        self._skip_unsampled = children_follow_unsampled_parents()

    def _timeout(self, seconds: int) -> timedelta:
        timeout = self._timeouts.get(seconds)
        if timeout is None:
            timeout = self._timeouts[seconds] = timedelta(seconds=seconds)
        return timeout

    async def close(self) -> None:
        origins, self._origins = list(self._origins.values()), {}
        for origin in origins:
            await origin.client.close()

    def _build(self, host: str, port: int, address: str | None) -> Client:
        builder = (
            ClientBuilder()
            .follow_redirects(False)
            .connect_timeout(self._connect_timeout)
            .pool_max_idle_per_host(self._pool_size)
            .user_agent(self._user_agent)
            .no_proxy()
            .gzip(False)
        )
        for pem in self._roots:
            builder = builder.add_root_certificate_pem(pem)
        if address is not None:
            builder = builder.resolve(host, address, port)
        return builder.build()

    async def _client_for(self, url: str) -> Client:
        """The origin's client: the pool of its keep-alive connections, pinned to the checked
        address when guarded. Refuses (`AddressRefused`) what the guard refuses."""
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port or (443 if parts.scheme == "https" else 80)
        key = (parts.scheme, host, port)
        now = time.monotonic()
        origin = self._origins.pop(key, None)
        if origin is not None and (
            self._guard is None or now - origin.checked_at < RECHECK_SECONDS
        ):
            self._origins[key] = origin
            return origin.client
        address: str | None = None
        if self._guard is not None:
            checked = await resolve_checked(url, self._guard.policy, resolver=self._guard.resolver)
            address = str(checked)
        if origin is None or origin.address != address:
            origin = _Origin(self._build(host, port, address), address, now)
        else:
            origin.checked_at = now
        self._origins[key] = origin
        while len(self._origins) > MAX_CLIENTS:
            # Dropped, not closed: attempts still using it finish on their own.
            del self._origins[next(iter(self._origins))]
        return origin.client

    def attempt(self, job: DeliveryJob) -> Coroutine[Any, Any, AttemptResult]:
        """Send `job` once (await the answer). Untraced (no SDK): no span objects and no
        coroutine of its own, and the receiver gets the trace context the delivery keeps (the
        producer's) unless its subscription says no."""
        if self._traced and not (
            self._skip_unsampled and not job.stored and sampled(job.traceparent) is False
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
        # A first attempt without a trace to continue starts one: never the child of whatever
        # span this task happens to have current.
        token = None if job.stored else otel_context.attach(context_from(origin) or Context())
        try:
            with attempt_span(
                subscription_id=str(job.subscription_id),
                event_type=job.event_type,
                webhook_id=job.message_id,
                attempt=job.attempts + 1,
                origin=origin if job.stored else None,
            ) as span:
                if job.send_trace_context:
                    ours = span.trace_headers
                    result = await self._attempt(job, ours.get(TRACEPARENT), ours.get(TRACESTATE))
                else:
                    result = await self._attempt(job, None, None)
                span.finish(
                    status_code=result.status_code,
                    outcome="succeeded"
                    if result.succeeded
                    else outcome_of(result.status_code, result.failure).value,
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
        headers = {
            **job.headers,
            "content-type": "application/json",
            # `jobs.signed_at(attempted_at)`, inlined: the portal shows the signature again
            # from the attempt log's time.
            **webhook_headers(job.message_id, body, job.secrets, int(attempted_at.timestamp())),
        }
        if traceparent:
            headers[TRACEPARENT] = traceparent
            if tracestate:
                headers[TRACESTATE] = tracestate
        status: int | None = None
        text: str | None = None
        error: str | None = None
        retry_after: str | None = None
        failure: Failure | None = None
        # The one place an attempt is sent and its outcome known.
        try:
            client = await self._client_for(job.endpoint_url)
            request = (
                client.post(job.endpoint_url)
                .headers(headers)
                .body_bytes(body)
                .timeout(self._timeout(job.timeout_seconds))
                .streamed_read_buffer_limit(self._limit)
                .build_streamed()
            )
            async with request as response:
                status = response.status
                retry_after = response.get_header("retry-after")
                if status in _NO_BODY or response.get_header("content-length") == "0":
                    text = ""  # nothing to wait for: one round trip into the client less
                else:
                    # At most the limit is read: the connection of a longer answer is dropped.
                    raw = await response.body_reader.read(self._limit)
                    text = bytes(raw or b"").decode("utf-8", errors="replace")
        except AddressRefused as exc:
            error, failure = f"refused: {exc}", Failure.REFUSED
        except TimeoutError:
            error, failure = f"timed out after {job.timeout_seconds} s", Failure.TIMEOUT
        except (PyreqwestError, OSError, ValueError) as exc:
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
