"""The outbox relay: publishes committed outbox rows to JetStream and marks them sent."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

import structlog
from nats.js import JetStreamContext
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from servicekit.db.notify import NotifyListener
from servicekit.events.envelope import CloudEvent
from servicekit.events.outbox import OUTBOX_CHANNEL
from servicekit.loops import describe, is_outage
from servicekit.tracing.spans import publish_span

logger = structlog.get_logger(__name__)

_CLAIM = text(
    """
    SELECT id, type, tenant, data, traceparent, tracestate, occurred_at FROM outbox_events
    WHERE published_at IS NULL AND failed_at IS NULL
    ORDER BY seq
    LIMIT :limit
    FOR UPDATE SKIP LOCKED
    """
)
_MARK_SENT = text("UPDATE outbox_events SET published_at = now() WHERE id = ANY(:ids)")
_SET_ASIDE = text("UPDATE outbox_events SET failed_at = now(), last_error = :error WHERE id = :id")
LOOP = "outbox-relay"
# After a failed attempt the relay waits its poll interval, doubling up to this. Short: a
# NATS cluster elects a stream's leader in 4 to 9 s, and every second waited past that is a
# second added to every event's latency.
RETRY_MAX_SECONDS = 5.0


class OutboxRelay:
    """Claims pending rows with SKIP LOCKED (so several workers share the work), publishes them
    with `Nats-Msg-Id` = event id (so a row published twice is one stream message) and marks them
    sent in the same transaction. Woken by LISTEN/NOTIFY, with polling as the fall-back.
    Published rows are deleted later by their own loop (servicekit.retention).

    A row that cannot be published (its envelope cannot be made, NATS refuses that message:
    past its size limit, say) is set aside with its error (`failed_at`, `last_error`; kept,
    retention too leaves it to an operator) and the rest of its batch goes on. NATS or the
    database being away is not the row's fault: the whole batch stays and is tried again
    (`servicekit.loops.is_outage`).
    """

    def __init__(
        self,
        engine: AsyncEngine,
        js: JetStreamContext,
        *,
        source: str,
        database_url: str,
        batch_size: int = 500,
        poll_seconds: float = 1.0,
        publish_timeout: float = 5.0,
    ) -> None:
        self._engine = engine
        self._js = js
        self._source = source
        self._database_url = database_url
        self._batch_size = batch_size
        self._poll_seconds = poll_seconds
        self._publish_timeout = publish_timeout

    async def publish_pending(self) -> int:
        """Publish one batch; the number of rows it handled (published or set aside).
        Raises when NATS or the database is away (the rows stay)."""
        async with self._engine.begin() as conn:
            rows = (await conn.execute(_CLAIM, {"limit": self._batch_size})).all()
            if not rows:
                return 0
            acks: list[tuple[Any, Awaitable[Any]]] = []
            refused: list[tuple[Any, BaseException]] = []
            for row in rows:
                try:
                    acks.append((row, await self._publish(row)))
                except Exception as exc:
                    if is_outage(exc):
                        raise  # rolls the claim back; the rows go out on the next attempt
                    refused.append((row, exc))
            # Raising here rolls the claim back; the rows go out on the next attempt.
            results = await asyncio.wait_for(
                asyncio.gather(*(ack for _, ack in acks), return_exceptions=True),
                timeout=self._publish_timeout,
            )
            published = []
            for (row, _), result in zip(acks, results, strict=True):
                if isinstance(result, BaseException):
                    if is_outage(result):
                        raise result
                    refused.append((row, result))
                else:
                    published.append(row.id)
            if published:
                await conn.execute(_MARK_SENT, {"ids": published})
            for row, problem in refused:
                error = describe(problem)
                await conn.execute(_SET_ASIDE, {"id": row.id, "error": error})
                logger.error(
                    "outbox event set aside: it cannot be published",
                    loop=LOOP,
                    source=self._source,
                    event_id=str(row.id),
                    event_type=row.type,
                    error=error,
                )
        if published:
            logger.info("outbox batch published", source=self._source, events=len(published))
        return len(rows)

    async def _publish(self, row: Any) -> Awaitable[Any]:
        """Send one row's envelope; its acknowledgement, to be awaited."""
        event = CloudEvent(
            id=row.id,
            source=self._source,
            type=row.type,
            time=row.occurred_at,
            data=row.data,
            tenant=row.tenant,
            traceparent=row.traceparent,
            tracestate=row.tracestate,
        )
        with publish_span(event) as trace_headers:
            return await self._js.publish_async(
                event.subject,
                event.to_json(),
                headers={"Nats-Msg-Id": str(event.id), **trace_headers},
            )

    async def run(
        self, stop: asyncio.Event, progress: Callable[[float], None] | None = None
    ) -> None:
        """Until `stop`; `progress(wait)` after each completed iteration (servicekit.loops)."""
        backoff = self._poll_seconds
        async with NotifyListener(
            self._database_url, OUTBOX_CHANNEL, poll_seconds=self._poll_seconds
        ) as listener:
            while not stop.is_set():
                try:
                    # A full batch means more may be waiting: drain before sleeping.
                    published = self._batch_size
                    while published == self._batch_size:
                        published = await self.publish_pending()
                        if progress is not None:
                            progress(0.0)  # a long backlog drains batch by batch
                    backoff = self._poll_seconds
                    if progress is not None:
                        progress(backoff)
                except Exception as exc:
                    logger.warning("outbox relay could not publish", error=repr(exc))
                    backoff = min(backoff * 2, RETRY_MAX_SECONDS)
                    # Waited out whatever commits notify meanwhile: woken by each, the relay
                    # retried as fast as the API committed (30 times a second per worker
                    # while a NATS cluster elected the stream's leader).
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(stop.wait(), backoff)
                    continue
                await listener.wait(backoff, stop=stop)
