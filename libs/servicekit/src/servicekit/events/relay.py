"""The outbox relay: publishes committed outbox rows to JetStream and marks them sent."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import structlog
from nats.js import JetStreamContext
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from servicekit.db.notify import NotifyListener
from servicekit.events.envelope import CloudEvent
from servicekit.events.outbox import OUTBOX_CHANNEL
from servicekit.tracing.spans import publish_span

logger = structlog.get_logger(__name__)

_CLAIM = text(
    """
    SELECT id, type, tenant, data, traceparent, tracestate, occurred_at FROM outbox_events
    WHERE published_at IS NULL
    ORDER BY seq
    LIMIT :limit
    FOR UPDATE SKIP LOCKED
    """
)
_MARK_SENT = text("UPDATE outbox_events SET published_at = now() WHERE id = ANY(:ids)")
_PURGE = text("DELETE FROM outbox_events WHERE published_at < :before")


class OutboxRelay:
    """Claims pending rows with SKIP LOCKED (so several workers share the work), publishes them
    with `Nats-Msg-Id` = event id (so a row published twice is one stream message) and marks them
    sent in the same transaction. Woken by LISTEN/NOTIFY, with polling as the fall-back."""

    def __init__(
        self,
        engine: AsyncEngine,
        js: JetStreamContext,
        *,
        source: str,
        database_url: str,
        batch_size: int = 500,
        poll_seconds: float = 1.0,
        retention: timedelta = timedelta(hours=24),
        publish_timeout: float = 5.0,
    ) -> None:
        self._engine = engine
        self._js = js
        self._source = source
        self._database_url = database_url
        self._batch_size = batch_size
        self._poll_seconds = poll_seconds
        self._retention = retention
        self._publish_timeout = publish_timeout

    async def publish_pending(self) -> int:
        """Publish one batch; the number published. Raises when NATS refuses (rows stay)."""
        async with self._engine.begin() as conn:
            rows = (await conn.execute(_CLAIM, {"limit": self._batch_size})).all()
            if not rows:
                return 0
            acks = []
            for row in rows:
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
                    acks.append(
                        await self._js.publish_async(
                            event.subject,
                            event.to_json(),
                            headers={"Nats-Msg-Id": str(event.id), **trace_headers},
                        )
                    )
            # Raising here rolls the claim back; the rows go out on the next attempt.
            await asyncio.wait_for(asyncio.gather(*acks), timeout=self._publish_timeout)
            await conn.execute(_MARK_SENT, {"ids": [row.id for row in rows]})
        logger.info("outbox batch published", source=self._source, events=len(rows))
        return len(rows)

    async def purge_published(self) -> int:
        async with self._engine.begin() as conn:
            before = datetime.now(UTC) - self._retention
            result = await conn.execute(_PURGE, {"before": before})
            return int(getattr(result, "rowcount", 0) or 0)

    async def run(self, stop: asyncio.Event) -> None:
        backoff = self._poll_seconds
        last_purge = datetime.min.replace(tzinfo=UTC)
        async with NotifyListener(
            self._database_url, OUTBOX_CHANNEL, poll_seconds=self._poll_seconds
        ) as listener:
            while not stop.is_set():
                try:
                    # A full batch means more may be waiting: drain before sleeping.
                    published = self._batch_size
                    while published == self._batch_size:
                        published = await self.publish_pending()
                    backoff = self._poll_seconds
                    if datetime.now(UTC) - last_purge > timedelta(minutes=10):
                        await self.purge_published()
                        last_purge = datetime.now(UTC)
                except Exception as exc:
                    logger.warning("outbox relay could not publish", error=repr(exc))
                    backoff = min(backoff * 2, 30.0)
                await listener.wait(backoff, stop=stop)
