"""One attempt: sign, POST, read at most 4 KiB of the answer, time it."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime

import aiohttp
from pydantic_core import to_json
from servicekit.net import refusal_of
from servicekit.signing import webhook_headers

from webhook_hub.delivery_engine.jobs import DeliveryJob
from webhook_hub.subscriptions.endpoint_policy import EndpointGuard, EndpointRefused


@dataclass(frozen=True)
class AttemptResult:
    job: DeliveryJob
    attempted_at: datetime
    status_code: int | None
    response_body: str | None
    duration_ms: int
    error: str | None
    retry_after: str | None

    @property
    def succeeded(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


def render_body(job: DeliveryJob) -> bytes:
    """The Standard Webhooks payload shape: `{"type", "timestamp", "data"}`."""
    timestamp = job.event_time.astimezone(UTC).isoformat().replace("+00:00", "Z")
    return b"".join(
        (
            b'{"type":',
            to_json(job.event_type),
            b',"timestamp":"',
            timestamp.encode(),
            b'","data":',
            job.payload_json,
            b"}",
        )
    )


class WebhookSender:
    def __init__(
        self,
        http: aiohttp.ClientSession,
        *,
        user_agent: str,
        response_body_limit: int,
        guard: EndpointGuard | None,
    ) -> None:
        self._http = http
        self._user_agent = user_agent
        self._limit = response_body_limit
        self._guard = guard

    async def attempt(self, job: DeliveryJob) -> AttemptResult:
        attempted_at = datetime.now(UTC)
        started = time.perf_counter()
        body = render_body(job)
        headers = {
            **job.headers,
            "content-type": "application/json",
            "user-agent": self._user_agent,
            **webhook_headers(job.message_id, body, job.secrets),
        }
        status: int | None = None
        text: str | None = None
        error: str | None = None
        retry_after: str | None = None
        try:
            if self._guard is not None:
                await self._guard.check(job.endpoint_url)
            async with self._http.post(
                job.endpoint_url,
                data=body,
                headers=headers,
                timeout=aiohttp.ClientTimeout(total=job.timeout_seconds),
                allow_redirects=False,
            ) as response:
                status = response.status
                retry_after = response.headers.get("Retry-After")
                raw = await response.content.read(self._limit)
                text = raw.decode("utf-8", errors="replace")
        except EndpointRefused as exc:
            error = f"refused: {exc}"
        except TimeoutError:
            error = f"timed out after {job.timeout_seconds} s"
        except (aiohttp.ClientError, OSError) as exc:
            # The connector's guard refused the address it was about to connect to.
            refusal = refusal_of(exc)
            error = (
                f"refused: {refusal}" if refusal is not None else f"{type(exc).__name__}: {exc}"
            )[:1000]
        return AttemptResult(
            job=job,
            attempted_at=attempted_at,
            status_code=status,
            response_body=text,
            duration_ms=int((time.perf_counter() - started) * 1000),
            error=error,
            retry_after=retry_after,
        )
