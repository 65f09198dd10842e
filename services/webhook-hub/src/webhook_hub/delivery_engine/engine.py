"""The delivery loop: claim due deliveries, send them concurrently, record outcomes in batches.

Claims are leases: a worker that dies mid-flight leaves its claims to expire, and another
worker (or itself after a restart) sends them again with the same `webhook-id`. Each
subscription has a concurrency cap, so one slow endpoint cannot hold up the others.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections import defaultdict
from datetime import UTC, datetime
from typing import Any

import aiohttp
import psycopg
import structlog
from prometheus_client import Counter
from servicekit.db.engine import to_libpq_url
from servicekit.runtime import ServiceRuntime
from servicekit.worker import WorkerLoop
from sqlalchemy import text
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession

from webhook_hub.deliveries.repository import DELIVERIES_CHANNEL
from webhook_hub.delivery_engine.outcomes import record_outcomes
from webhook_hub.delivery_engine.policy import signing_secrets
from webhook_hub.delivery_engine.sender import AttemptResult, DeliveryJob, WebhookSender
from webhook_hub.settings import Settings
from webhook_hub.subscriptions.endpoint_policy import EndpointGuard

logger = structlog.get_logger(__name__)
# On the worker's /metrics (WORKER_PROBE_PORT): what this process has delivered.
ATTEMPTS = Counter(
    "webhook_delivery_attempts", "Delivery attempts recorded by this worker", ["outcome"]
)

_CLAIM = text(
    """
    WITH candidates AS (
        -- Bounded scan of the due index, so a deep backlog does not make every claim slower.
        SELECT d.id, d.subscription_id, d.next_attempt_at
        FROM deliveries d JOIN subscriptions s ON s.id = d.subscription_id
        WHERE d.status = 'pending' AND d.next_attempt_at <= now()
          AND (d.lease_until IS NULL OR d.lease_until < now())
          AND s.is_active
          AND NOT (d.subscription_id = ANY(CAST(:saturated AS uuid[])))
        ORDER BY d.next_attempt_at
        LIMIT :scan
    ), due AS (
        SELECT id, next_attempt_at,
               row_number() OVER (PARTITION BY subscription_id ORDER BY next_attempt_at) AS rank
        FROM candidates
    ), picked AS (
        SELECT id FROM due WHERE rank <= :per_subscription
        ORDER BY next_attempt_at LIMIT :limit
    )
    UPDATE deliveries d
    SET lease_until = now() + make_interval(secs => s.timeout_seconds * 2 + :lease_extra)
    FROM picked, subscriptions s
    WHERE d.id = picked.id AND s.id = d.subscription_id AND d.status = 'pending'
      AND (d.lease_until IS NULL OR d.lease_until < now())
    RETURNING d.id, d.subscription_id, d.event_type, d.event_time, d.payload, d.attempts,
              s.endpoint_url, s.secret, s.secret_old, s.secret_rotated_at, s.headers,
              s.timeout_seconds
    """
)
DISPATCH_CONSUMER = "webhook-hub-dispatch"
FLUSH_INTERVAL_SECONDS = 0.05
FLUSH_BATCH = 1000


class DeliveryEngine:
    def __init__(
        self,
        session_factory: async_sessionmaker[AsyncSession],
        settings: Settings,
        sender: WebhookSender,
    ) -> None:
        self._session_factory = session_factory
        self._settings = settings
        self._sender = sender
        self._in_flight: dict[uuid.UUID, int] = defaultdict(int)
        self._slots = asyncio.Semaphore(settings.delivery_concurrency)
        self._results: list[AttemptResult] = []
        self._results_ready = asyncio.Event()
        self._wake = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()

    async def claim(self) -> list[DeliveryJob]:
        cap = self._settings.per_subscription_concurrency
        saturated = [sub for sub, n in self._in_flight.items() if n >= cap]
        free = self._settings.delivery_concurrency - sum(self._in_flight.values())
        limit = min(self._settings.delivery_claim_batch, free)
        if limit <= 0:
            return []
        async with self._session_factory() as session, session.begin():
            connection = await session.connection()
            # A lease lost to a database crash only means the delivery is sent again sooner
            # (same webhook-id), so claims need not wait for the WAL flush.
            await connection.execute(text("SET LOCAL synchronous_commit = off"))
            rows = (
                await connection.execute(
                    _CLAIM,
                    {
                        "saturated": [str(s) for s in saturated],
                        "per_subscription": cap,
                        "limit": limit,
                        "scan": limit * 4,
                        "lease_extra": self._settings.delivery_lease_extra_seconds,
                    },
                )
            ).all()
        now = datetime.now(UTC)
        return [self._job(row, now) for row in rows]

    def _job(self, row: Any, now: datetime) -> DeliveryJob:
        return DeliveryJob(
            delivery_id=row.id,
            subscription_id=row.subscription_id,
            event_type=row.event_type,
            event_time=row.event_time,
            payload=row.payload,
            attempts=row.attempts,
            endpoint_url=row.endpoint_url,
            secrets=signing_secrets(
                row.secret,
                row.secret_old,
                row.secret_rotated_at,
                now,
                self._settings.secret_transition_seconds,
            ),
            headers=row.headers,
            timeout_seconds=row.timeout_seconds,
        )

    def room_for(self, subscription_id: uuid.UUID) -> int:
        """How many more attempts this worker may start for the subscription now."""
        free = self._settings.delivery_concurrency - sum(self._in_flight.values())
        cap = self._settings.per_subscription_concurrency - self._in_flight.get(subscription_id, 0)
        return max(0, min(free, cap))

    async def take(self, jobs: list[DeliveryJob]) -> None:
        """Jobs leased to this worker by dispatch (the hot path)."""
        for job in jobs:
            self.start(job)

    def start(self, job: DeliveryJob) -> None:
        self._in_flight[job.subscription_id] += 1
        task = asyncio.create_task(self._send(job))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send(self, job: DeliveryJob) -> None:
        try:
            async with self._slots:
                result = await self._sender.attempt(job)
            self._results.append(result)
            self._results_ready.set()
        finally:
            self._in_flight[job.subscription_id] -= 1
            if self._in_flight[job.subscription_id] <= 0:
                del self._in_flight[job.subscription_id]
            self._wake.set()

    async def flush(self) -> int:
        """Write the results gathered so far; on a database error they are kept and retried."""
        if not self._results:
            return 0
        batch, self._results = self._results[:FLUSH_BATCH], self._results[FLUSH_BATCH:]
        try:
            async with self._session_factory() as session, session.begin():
                await record_outcomes(session, batch, self._settings)
        except Exception:
            self._results = batch + self._results
            raise
        for result in batch:  # counted once recorded, so a retried flush counts nothing twice
            ATTEMPTS.labels("succeeded" if result.succeeded else "failed").inc()
        return len(batch)

    async def _flush_loop(self, stop: asyncio.Event) -> None:
        while not stop.is_set() or self._results or self._tasks:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._results_ready.wait(), 0.5)
            self._results_ready.clear()
            await asyncio.sleep(FLUSH_INTERVAL_SECONDS)
            try:
                # A full batch means more results are waiting: record them all.
                flushed = FLUSH_BATCH
                while flushed == FLUSH_BATCH:
                    flushed = await self.flush()
            except Exception as exc:
                logger.warning("could not record delivery outcomes; retrying", error=repr(exc))
                await asyncio.sleep(1.0)
            if stop.is_set() and not self._tasks and not self._results:
                return

    async def run(self, stop: asyncio.Event) -> None:
        flusher = asyncio.create_task(self._flush_loop(stop))
        listener = asyncio.create_task(self._listen(stop))
        try:
            while not stop.is_set():
                try:
                    jobs = await self.claim()
                except Exception as exc:
                    logger.warning("could not claim deliveries", error=repr(exc))
                    jobs = []
                    await asyncio.sleep(1.0)
                for job in jobs:
                    self.start(job)
                if len(jobs) >= self._settings.delivery_claim_batch:
                    await asyncio.sleep(0)
                    continue
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self._settings.delivery_poll_seconds)
                self._wake.clear()
        finally:
            # Let in-flight attempts finish and be recorded; what cannot be is leased and
            # will be sent again after the lease expires.
            if self._tasks:
                await asyncio.wait(self._tasks, timeout=15)
            stop.set()
            await asyncio.wait({flusher}, timeout=15)
            listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await listener

    async def _listen(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                async with await psycopg.AsyncConnection.connect(
                    to_libpq_url(self._settings.database_url), autocommit=True
                ) as conn:
                    await conn.execute(f"LISTEN {DELIVERIES_CHANNEL}")
                    async for _ in conn.notifies():
                        self._wake.set()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                logger.info("delivery listener reconnecting", error=repr(exc))
                await asyncio.sleep(1.0)


def delivery_pipeline(settings: Settings) -> WorkerLoop:
    """Dispatch and delivery in one loop, so dispatch can hand fresh jobs to the engine."""
    from servicekit.events.consumer import EventConsumer

    from webhook_hub.dispatch.handler import Dispatcher

    async def run(runtime: ServiceRuntime, stop: asyncio.Event) -> None:
        connector = aiohttp.TCPConnector(
            limit=settings.delivery_concurrency,
            limit_per_host=settings.per_subscription_concurrency * 4,
            keepalive_timeout=30,
            ttl_dns_cache=60,
        )
        async with aiohttp.ClientSession(connector=connector) as http:
            sender = WebhookSender(
                http,
                user_agent=settings.user_agent,
                response_body_limit=settings.response_body_limit,
                guard=EndpointGuard(settings.allowed_networks)
                if settings.ssrf_guard_enabled
                else None,
            )
            engine = DeliveryEngine(runtime.session_factory, settings, sender)
            consumer = EventConsumer(
                runtime.nats.js,
                runtime.session_factory,
                durable=DISPATCH_CONSUMER,
                handler=Dispatcher(settings, engine),
                on_committed=engine.take,
                # (subscription_id, event_id) is unique: dispatch is idempotent by itself.
                record_processed=False,
                stream=settings.events_stream,
                batch_size=settings.dispatch_batch_size,
            )
            await asyncio.gather(engine.run(stop), consumer.run(stop))

    return run
