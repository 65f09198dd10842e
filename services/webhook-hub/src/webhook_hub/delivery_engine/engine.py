"""The delivery engine: send deliveries concurrently, record outcomes in batches.

Two sources feed it. Dispatch admits each new event's deliveries straight from the event
message (first attempts, no row yet); the message is acknowledged once every one of them is
stored with its outcome. The claim loop leases due deliveries from the database (retries,
and deliveries set aside): a worker that dies mid-flight leaves its claims to expire, and
another worker (or itself after a restart) sends them again with the same `webhook-id`.

Each subscription has a concurrency cap, so one slow endpoint cannot hold up the others: an
admitted delivery beyond the cap waits in its subscription's queue, and one that waits there
too long is set aside (stored as pending, for the claim loop) so its event can be
acknowledged.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections import defaultdict, deque
from datetime import UTC, datetime
from typing import Any

import psycopg
import structlog
from prometheus_client import Counter
from servicekit.db.engine import to_libpq_url
from sqlalchemy import text
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession

from webhook_hub.deliveries.repository import DELIVERIES_CHANNEL
from webhook_hub.delivery_engine.jobs import DeliveryJob, EventTicket
from webhook_hub.delivery_engine.outcomes import record_outcomes
from webhook_hub.delivery_engine.policy import signing_secrets
from webhook_hub.delivery_engine.sender import AttemptResult, WebhookSender
from webhook_hub.settings import Settings

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
# Outcomes are written (and events acknowledged) at most this often: each write has a fixed
# cost, and nothing waits on it but the acknowledgement.
FLUSH_INTERVAL_SECONDS = 0.2
FLUSH_BATCH = 1000
CLAIM_PAUSE_SECONDS = 0.05


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
        # Admitted deliveries waiting for a slot of their subscription, oldest first.
        self._waiting: dict[uuid.UUID, deque[tuple[float, DeliveryJob]]] = {}
        self._waiting_count = 0
        self._room = asyncio.Event()
        # The event message behind each admitted delivery not stored yet.
        self._tickets: dict[uuid.UUID, EventTicket] = {}
        self._results: list[AttemptResult] = []
        self._set_aside: list[DeliveryJob] = []
        self._results_ready = asyncio.Event()
        self._wake = asyncio.Event()
        # The last claim held back for want of room: a finished attempt may make some.
        self._claim_held_back = False
        self._tasks: set[asyncio.Task[None]] = set()

    # --- new events, from dispatch ------------------------------------------------------

    def ticket_of(self, delivery_id: uuid.UUID) -> EventTicket | None:
        """The event message behind a delivery in this worker's hands and not stored yet."""
        return self._tickets.get(delivery_id)

    def admit(self, ticket: EventTicket, jobs: list[DeliveryJob]) -> None:
        """The first attempts of one event's deliveries; its message is acknowledged once
        they are all stored."""
        cap = self._settings.per_subscription_concurrency
        now = time.monotonic()
        ticket.outstanding += len(jobs)
        for job in jobs:
            self._tickets[job.delivery_id] = ticket
            queue = self._waiting.get(job.subscription_id)
            if queue is None and self._in_flight[job.subscription_id] < cap:
                self.start(job)
                continue
            if queue is None:
                queue = self._waiting[job.subscription_id] = deque()
            queue.append((now, job))
            self._waiting_count += 1

    async def room(self) -> None:
        """Wait while the queues hold as many deliveries as dispatch may leave waiting."""
        while self._waiting_count >= self._settings.dispatch_backlog:
            self._room.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._room.wait(), 1.0)

    def _next_waiting(self, subscription_id: uuid.UUID) -> DeliveryJob | None:
        queue = self._waiting.get(subscription_id)
        if not queue:
            return None
        _, job = queue.popleft()
        if not queue:
            del self._waiting[subscription_id]
        self._waiting_count -= 1
        if self._waiting_count < self._settings.dispatch_backlog:
            self._room.set()
        return job

    def set_aside_stale(self, now: float) -> None:
        """Deliveries that waited too long for their subscription (a slow endpoint) are stored
        as pending instead, so their events can be acknowledged; a claim loop sends them."""
        oldest = now - self._settings.dispatch_queue_seconds
        for subscription_id in [s for s, q in self._waiting.items() if q[0][0] <= oldest]:
            queue = self._waiting[subscription_id]
            while queue and queue[0][0] <= oldest:
                self._set_aside.append(queue.popleft()[1])
                self._waiting_count -= 1
            if not queue:
                del self._waiting[subscription_id]
        if self._set_aside:
            self._room.set()
            self._results_ready.set()

    def set_aside_all(self) -> None:
        self.set_aside_stale(float("inf"))

    # --- due deliveries, from the database -------------------------------------------------

    async def claim(self) -> list[DeliveryJob]:
        cap = self._settings.per_subscription_concurrency
        saturated = [sub for sub, n in self._in_flight.items() if n >= cap]
        free = self._settings.delivery_concurrency - sum(self._in_flight.values())
        limit = min(self._settings.delivery_claim_batch, free)
        self._claim_held_back = bool(saturated) or limit < self._settings.delivery_claim_batch
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

    # --- sending -------------------------------------------------------------------------

    def start(self, job: DeliveryJob) -> None:
        self._in_flight[job.subscription_id] += 1
        task = asyncio.create_task(self._send(job))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send(self, job: DeliveryJob) -> None:
        """One of the subscription's slots: sends this job, then the subscription's waiting
        ones (a task per slot, not per delivery)."""
        subscription_id = job.subscription_id
        next_job: DeliveryJob | None = job
        try:
            while next_job is not None:
                async with self._slots:
                    result = await self._sender.attempt(next_job)
                self._results.append(result)
                self._results_ready.set()
                next_job = self._next_waiting(subscription_id)
        except asyncio.CancelledError:
            next_job = None
            raise
        finally:
            self._in_flight[subscription_id] -= 1
            if self._in_flight[subscription_id] <= 0:
                del self._in_flight[subscription_id]
            if next_job is not None:  # an unexpected error ended this slot's run: go on
                self.start(next_job)
            if self._claim_held_back:
                self._wake.set()

    # --- recording -----------------------------------------------------------------------

    async def flush(self) -> int:
        """Write the results gathered so far (and what was set aside), then acknowledge the
        events that are stored in full; on a database error all is kept and retried."""
        if not self._results and not self._set_aside:
            return 0
        batch, self._results = self._results[:FLUSH_BATCH], self._results[FLUSH_BATCH:]
        aside, self._set_aside = self._set_aside[:FLUSH_BATCH], self._set_aside[FLUSH_BATCH:]
        try:
            async with self._session_factory() as session, session.begin():
                await record_outcomes(session, batch, self._settings, aside)
        except Exception:
            self._results = batch + self._results
            self._set_aside = aside + self._set_aside
            raise
        for result in batch:  # counted once recorded, so a retried flush counts nothing twice
            ATTEMPTS.labels("succeeded" if result.succeeded else "failed").inc()
        for job in (*(result.job for result in batch), *aside):
            ticket = self._tickets.pop(job.delivery_id, None)
            if ticket is not None and ticket.settle_one():
                await ticket.msg.ack()
        return len(batch) + len(aside)

    async def _keep_events_claimed(self, stop: asyncio.Event) -> None:
        """Tell JetStream the events still being worked on are, before it hands them out again
        (a slow endpoint can take longer than the ack wait). Its own loop, every quarter of
        the ack wait, so a notice never comes later than half of it after the last."""
        period = self._settings.dispatch_ack_wait_seconds / 4
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), period)
            now = time.monotonic()
            for ticket in {id(t): t for t in self._tickets.values()}.values():
                if now - ticket.touched >= period:
                    ticket.touched = now
                    with contextlib.suppress(Exception):
                        await ticket.msg.in_progress()

    async def _flush_loop(self, stop: asyncio.Event) -> None:
        while not stop.is_set() or self._results or self._set_aside or self._tasks:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._results_ready.wait(), 0.5)
            self._results_ready.clear()
            await asyncio.sleep(FLUSH_INTERVAL_SECONDS)
            now = time.monotonic()
            self.set_aside_stale(now)
            try:
                # A full batch means more results are waiting: record them all.
                flushed = FLUSH_BATCH
                while flushed >= FLUSH_BATCH:
                    flushed = await self.flush()
            except Exception as exc:
                logger.warning("could not record delivery outcomes; retrying", error=repr(exc))
                await asyncio.sleep(1.0)
            if stop.is_set() and not self._tasks and not self._results and not self._set_aside:
                return

    async def run(self, stop: asyncio.Event) -> None:
        flusher = asyncio.create_task(self._flush_loop(stop))
        listener = asyncio.create_task(self._listen(stop))
        keeper = asyncio.create_task(self._keep_events_claimed(stop))
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
                # Wake-ups that come while this pause lasts make one claim, not one each (each
                # finished attempt of a saturated subscription wakes the loop).
                await asyncio.sleep(CLAIM_PAUSE_SECONDS)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self._settings.delivery_poll_seconds)
                self._wake.clear()
        finally:
            # Waiting deliveries are stored as pending; in-flight attempts may finish and be
            # recorded. What cannot be is sent again later: a leased delivery when its lease
            # expires, an unacknowledged event when JetStream hands it out again.
            self.set_aside_all()
            if self._tasks:
                await asyncio.wait(self._tasks, timeout=15)
            stop.set()
            await asyncio.wait({flusher}, timeout=15)
            for helper in (listener, keeper):
                helper.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await helper

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
