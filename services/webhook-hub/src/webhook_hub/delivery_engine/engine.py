"""The delivery engine: send deliveries concurrently, record outcomes in batches.

Two sources feed it. Dispatch admits each new event's deliveries straight from the event
message (first attempts, no row yet); the message is acknowledged once every one of them is
stored with its outcome. The claim loop leases due deliveries from the database (retries,
and deliveries set aside): a worker that dies mid-flight leaves its claims to expire, and
another worker (or itself after a restart) sends them again with the same `webhook-id`.

Each subscription has a concurrency cap, so one slow endpoint cannot hold up the others, and
each owner a fair share of the worker's slots (admission.py), so one owner's many slow
endpoints cannot hold up other owners: an admitted delivery beyond either waits in its
subscription's queue, and one that waits there too long is set aside (stored as pending, for
the claim loop; a claimed one has its lease released) so its event can be acknowledged.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections import defaultdict, deque
from datetime import UTC, datetime
from typing import Any

import structlog
from prometheus_client import Counter
from servicekit.db.notify import NotifyListener
from sqlalchemy import BindParameter, bindparam, text
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession

from webhook_hub.deliveries.repository import DELIVERIES_CHANNEL, wake_delivery_workers
from webhook_hub.delivery_engine.admission import may_start, owner_share
from webhook_hub.delivery_engine.jobs import DeliveryJob, EventTicket
from webhook_hub.delivery_engine.outcomes import record_outcomes
from webhook_hub.delivery_engine.policy import signing_secrets
from webhook_hub.delivery_engine.sender import AttemptResult, WebhookSender
from webhook_hub.models import AttemptOutcome, DeliveryStatus
from webhook_hub.settings import Settings

logger = structlog.get_logger(__name__)
# On the worker's /metrics (WORKER_PROBE_PORT): what this process has delivered.
ATTEMPTS = Counter(
    "webhook_delivery_attempts", "Delivery attempts recorded by this worker", ["outcome"]
)

# The status reaches the server as a literal (rendered from the enum), not a bound parameter:
# the due index is partial on `status = 'pending'`, and only a literal lets every plan use it.
_PENDING: BindParameter[str] = bindparam(
    "pending", DeliveryStatus.PENDING.value, literal_execute=True
)
_CLAIM = text(
    """
    WITH candidates AS (
        -- Bounded scan of the due index, so a deep backlog does not make every claim slower.
        SELECT d.id, d.subscription_id, d.next_attempt_at, s.owner
        FROM deliveries d JOIN subscriptions s ON s.id = d.subscription_id
        WHERE d.status = :pending AND d.next_attempt_at <= now()
          AND (d.lease_until IS NULL OR d.lease_until < now())
          AND s.is_active
          AND NOT (d.subscription_id = ANY(CAST(:saturated AS uuid[])))
          AND NOT (s.owner = ANY(CAST(:saturated_owners AS varchar[])))
        ORDER BY d.next_attempt_at
        LIMIT :scan
    ), due AS (
        SELECT id, next_attempt_at,
               row_number() OVER (PARTITION BY subscription_id ORDER BY next_attempt_at) AS rank,
               row_number() OVER (PARTITION BY owner ORDER BY next_attempt_at) AS owner_rank
        FROM candidates
    ), picked AS (
        SELECT id FROM due WHERE rank <= :per_subscription AND owner_rank <= :per_owner
        ORDER BY next_attempt_at LIMIT :limit
    )
    UPDATE deliveries d
    SET lease_until = now() + make_interval(secs => s.timeout_seconds * 2 + :lease_extra)
    FROM picked, subscriptions s
    WHERE d.id = picked.id AND s.id = d.subscription_id AND d.status = :pending
      AND (d.lease_until IS NULL OR d.lease_until < now())
    RETURNING d.id, d.subscription_id, d.event_type, d.event_time, d.payload, d.attempts,
              s.endpoint_url, s.secret, s.secret_old, s.secret_rotated_at, s.headers,
              s.timeout_seconds, s.owner
    """
).bindparams(_PENDING)
# Claimed deliveries that waited too long for a slot go back to the claim loops at once.
_RELEASE = text(
    "UPDATE deliveries SET lease_until = NULL WHERE id = ANY(CAST(:ids AS uuid[]))"
    " AND status = :pending"
).bindparams(_PENDING)
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
        # Attempts in flight: per subscription, per owner, in all.
        self._in_flight: dict[uuid.UUID, int] = defaultdict(int)
        self._owner_in_flight: dict[str, int] = defaultdict(int)
        self._total_in_flight = 0
        # In flight plus waiting, per owner: its keys are the owners with work here.
        self._owner_load: dict[str, int] = {}
        # Admitted deliveries waiting for a slot, oldest first, per subscription; and the
        # subscriptions with waiting deliveries of each owner.
        self._waiting: dict[uuid.UUID, deque[tuple[float, DeliveryJob]]] = {}
        self._waiting_of_owner: dict[str, dict[uuid.UUID, None]] = {}
        self._waiting_count = 0
        self._room = asyncio.Event()
        # The event message behind each admitted delivery not stored yet.
        self._tickets: dict[uuid.UUID, EventTicket] = {}
        self._results: list[AttemptResult] = []
        self._set_aside: list[DeliveryJob] = []
        self._results_ready = asyncio.Event()
        # Woken by new due deliveries (NOTIFY) and by finished attempts when a claim held back.
        self._wake = NotifyListener(
            settings.database_url, DELIVERIES_CHANNEL, poll_seconds=settings.delivery_poll_seconds
        )
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
        now = time.monotonic()
        ticket.outstanding += len(jobs)
        for job in jobs:
            self._tickets[job.delivery_id] = ticket
            self.offer(job, now)

    def offer(self, job: DeliveryJob, now: float) -> None:
        """Start the job if its subscription and its owner have room, else queue it."""
        if (
            job.subscription_id not in self._waiting
            and self._in_flight[job.subscription_id] < self._settings.per_subscription_concurrency
            and self._admissible(job.owner)
        ):
            self.start(job)
            return
        queue = self._waiting.get(job.subscription_id)
        if queue is None:
            queue = self._waiting[job.subscription_id] = deque()
            self._waiting_of_owner.setdefault(job.owner, {})[job.subscription_id] = None
        queue.append((now, job))
        self._waiting_count += 1
        self._owner_load[job.owner] = self._owner_load.get(job.owner, 0) + 1

    def _admissible(self, owner: str) -> bool:
        active = len(self._owner_load) + (owner not in self._owner_load)
        return may_start(
            owner_in_flight=self._owner_in_flight.get(owner, 0),
            total_in_flight=self._total_in_flight,
            active_owners=active,
            capacity=self._settings.delivery_concurrency,
            floor=self._settings.owner_concurrency_floor,
        )

    def _unload(self, owner: str) -> None:
        load = self._owner_load[owner] - 1
        if load:
            self._owner_load[owner] = load
        else:
            del self._owner_load[owner]

    async def room(self) -> None:
        """Wait while the queues hold as many deliveries as dispatch may leave waiting."""
        while self._waiting_count >= self._settings.dispatch_backlog:
            self._room.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._room.wait(), 1.0)

    def _take_waiting(self, subscription_id: uuid.UUID) -> DeliveryJob:
        queue = self._waiting[subscription_id]
        _, job = queue.popleft()
        if not queue:
            self._forget_queue(subscription_id, job.owner)
        self._waiting_count -= 1
        self._unload(job.owner)
        if self._waiting_count < self._settings.dispatch_backlog:
            self._room.set()
        return job

    def _forget_queue(self, subscription_id: uuid.UUID, owner: str) -> None:
        del self._waiting[subscription_id]
        subscriptions = self._waiting_of_owner[owner]
        del subscriptions[subscription_id]
        if not subscriptions:
            del self._waiting_of_owner[owner]

    def _pump(self) -> None:
        """Start the waiting deliveries that now have room, owner by owner."""
        cap = self._settings.per_subscription_concurrency
        for owner in list(self._waiting_of_owner):
            while self._admissible(owner):
                subscriptions = self._waiting_of_owner.get(owner)
                if not subscriptions:
                    break
                # Not iterated on after a take (which may drop the subscription from it).
                ready = next((s for s in subscriptions if self._in_flight[s] < cap), None)
                if ready is None:
                    break
                self.start(self._take_waiting(ready))
                if ready in subscriptions:  # round robin between an owner's subscriptions
                    del subscriptions[ready]
                    subscriptions[ready] = None

    def set_aside_stale(self, now: float) -> None:
        """Deliveries that waited too long for their subscription (a slow endpoint) are stored
        as pending instead, so their events can be acknowledged; a claim loop sends them."""
        oldest = now - self._settings.dispatch_queue_seconds
        for subscription_id in [s for s, q in self._waiting.items() if q[0][0] <= oldest]:
            queue = self._waiting[subscription_id]
            owner = queue[0][1].owner
            while queue and queue[0][0] <= oldest:
                self._set_aside.append(queue.popleft()[1])
                self._waiting_count -= 1
                self._unload(owner)
            if not queue:
                self._forget_queue(subscription_id, owner)
        if self._waiting_count:  # fewer owners with work: larger shares for the others
            self._pump()
        if self._set_aside:
            self._room.set()
            self._results_ready.set()

    def set_aside_all(self) -> None:
        self.set_aside_stale(float("inf"))

    # --- due deliveries, from the database -------------------------------------------------

    async def claim(self) -> list[DeliveryJob]:
        cap = self._settings.per_subscription_concurrency
        saturated = [sub for sub, n in self._in_flight.items() if n >= cap]
        saturated_owners = [o for o in self._owner_in_flight if not self._admissible(o)]
        # What an owner not busy here yet may take: claims beyond an owner's room would only
        # wait for a slot.
        per_owner = owner_share(
            self._settings.delivery_concurrency,
            len(self._owner_load) + 1,
            self._settings.owner_concurrency_floor,
        )
        free = self._settings.delivery_concurrency - self._total_in_flight
        limit = min(self._settings.delivery_claim_batch, free)
        self._claim_held_back = (
            bool(saturated) or bool(saturated_owners) or limit < self._settings.delivery_claim_batch
        )
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
                        "saturated_owners": saturated_owners,
                        "per_subscription": cap,
                        "per_owner": per_owner,
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
            owner=row.owner,
        )

    # --- sending -------------------------------------------------------------------------

    def start(self, job: DeliveryJob) -> None:
        """Send the job now (its room was checked): takes a slot of its subscription, of its
        owner and of the worker."""
        self._take_slot(job)
        task = asyncio.create_task(self._send(job))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _take_slot(self, job: DeliveryJob) -> None:
        self._in_flight[job.subscription_id] += 1
        self._owner_in_flight[job.owner] += 1
        self._total_in_flight += 1
        self._owner_load[job.owner] = self._owner_load.get(job.owner, 0) + 1

    def _free_slot(self, job: DeliveryJob) -> None:
        subscription_id, owner = job.subscription_id, job.owner
        self._in_flight[subscription_id] -= 1
        if self._in_flight[subscription_id] <= 0:
            del self._in_flight[subscription_id]
        self._owner_in_flight[owner] -= 1
        if self._owner_in_flight[owner] <= 0:
            del self._owner_in_flight[owner]
        self._total_in_flight -= 1
        self._unload(owner)

    def _next_for(self, job: DeliveryJob) -> DeliveryJob | None:
        """After an attempt (its slot freed): the subscription's next waiting job, to send in
        this same task, when it has room and no other owner is waiting (the common case, kept
        cheap); otherwise whatever waits and has room is started, fairly, in tasks of its
        own."""
        if not self._waiting_count:
            return None
        owner = job.owner
        others_waiting = len(self._waiting_of_owner) > (owner in self._waiting_of_owner)
        if not others_waiting and job.subscription_id in self._waiting and self._admissible(owner):
            next_job = self._take_waiting(job.subscription_id)
            self._take_slot(next_job)
            return next_job
        self._pump()
        return None

    async def _send(self, job: DeliveryJob) -> None:
        """One slot: sends this job, then (while it has room) its subscription's waiting ones
        (a task per slot, not per delivery)."""
        current: DeliveryJob | None = job
        try:
            while current is not None:
                result = await self._sender.attempt(current)
                self._results.append(result)
                self._results_ready.set()
                done, current = current, None
                self._free_slot(done)
                current = self._next_for(done)
        except BaseException:
            if current is not None:  # its slot is still held
                self._free_slot(current)
                if self._waiting_count:
                    self._pump()
            raise
        finally:
            if self._claim_held_back:
                self._wake.wake()

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
                await record_outcomes(
                    session, batch, self._settings, [job for job in aside if not job.stored]
                )
                claimed = [str(job.delivery_id) for job in aside if job.stored]
                if claimed:
                    connection = await session.connection()
                    await connection.execute(_RELEASE, {"ids": claimed})
                    await wake_delivery_workers(session)
        except Exception:
            self._results = batch + self._results
            self._set_aside = aside + self._set_aside
            raise
        for result in batch:  # counted once recorded, so a retried flush counts nothing twice
            outcome = AttemptOutcome.SUCCEEDED if result.succeeded else AttemptOutcome.FAILED
            ATTEMPTS.labels(outcome.value).inc()
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
        self._wake.start()
        keeper = asyncio.create_task(self._keep_events_claimed(stop))
        try:
            while not stop.is_set():
                try:
                    jobs = await self.claim()
                except Exception as exc:
                    logger.warning("could not claim deliveries", error=repr(exc))
                    jobs = []
                    await asyncio.sleep(1.0)
                now = time.monotonic()
                for job in jobs:
                    self.offer(job, now)
                if len(jobs) >= self._settings.delivery_claim_batch:
                    await asyncio.sleep(0)
                    continue
                # Wake-ups that come while this pause lasts make one claim, not one each (each
                # finished attempt of a saturated subscription wakes the loop).
                await asyncio.sleep(CLAIM_PAUSE_SECONDS)
                await self._wake.wait()
        finally:
            # Waiting deliveries are stored as pending; in-flight attempts may finish and be
            # recorded. What cannot be is sent again later: a leased delivery when its lease
            # expires, an unacknowledged event when JetStream hands it out again.
            self.set_aside_all()
            if self._tasks:
                await asyncio.wait(self._tasks, timeout=15)
            stop.set()
            await asyncio.wait({flusher}, timeout=15)
            await self._wake.close()
            keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await keeper
