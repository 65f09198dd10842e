"""The delivery engine: send deliveries concurrently, record outcomes in batches.

Two sources feed it. Dispatch admits each new event's deliveries straight from the event
message (first attempts, no row yet); the message is acknowledged once every one of them is
stored with its outcome. The claim loop leases due deliveries from the database (retries,
and deliveries set aside): a worker that dies mid-flight leaves its claims to expire, and
another worker (or itself after a restart) sends them again with the same `webhook-id`.

Which delivery starts when (per-subscription caps, owners' fair shares, queues) is decided by
scheduling.py, what an answer means and what comes next by decisions.py; this module only
runs tasks, and a delivery that waits too long for a slot is set aside (stored as pending, for
the claim loop; a claimed one has its lease released) so its event can be acknowledged.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Set
from datetime import UTC, datetime
from typing import Any

import structlog
from prometheus_client import Counter, Gauge
from servicekit.events.nats_adapter import ack_all
from servicekit.histograms import BatchHistogram
from servicekit.loops import is_outage

from webhook_hub.delivery_engine.activity import DeliveryActivity
from webhook_hub.delivery_engine.breakers import Breakers
from webhook_hub.delivery_engine.decisions import (
    Admission,
    BreakerRules,
    RetryRules,
    attempt_that_raised,
    unrecordable,
)
from webhook_hub.delivery_engine.jobs import (
    AttemptResult,
    DeliveryJob,
    EventTicket,
    FirstAttempt,
    Outcome,
    StoredDelivery,
)
from webhook_hub.delivery_engine.rate_limit import next_claim_in
from webhook_hub.delivery_engine.scheduling import (
    ClaimLimits,
    Scheduler,
    wake_claims_on_free_slot,
)
from webhook_hub.delivery_engine.sender import WebhookSender
from webhook_hub.delivery_engine.store import DeliveryStore
from webhook_hub.models import AttemptOutcome
from webhook_hub.settings import Settings
from webhook_hub.wire_format import signing_secrets

logger = structlog.get_logger(__name__)
# On the worker's /metrics (WORKER_PROBE_PORT): what this process has delivered.
ATTEMPTS = Counter(
    "webhook_delivery_attempts", "Delivery attempts recorded by this worker", ["outcome"]
)
# Observed a batch at a time when the batch is recorded, off the sending path (one
# `Histogram.observe` per value cost 2.1 µs, two per delivery; see servicekit.histograms).
ATTEMPT_SECONDS = BatchHistogram(
    "webhook_delivery_attempt_seconds",
    "Duration of one delivery attempt, by outcome (delivered, gone, throttled, rejected, "
    "timed_out, refused, unreachable)",
    ["outcome"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
LAG_SECONDS = BatchHistogram(
    "webhook_delivery_lag_seconds",
    "From an event's publication to its receiver's 2xx answer",
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 3600),
)
# Every outcome's series from the start, as `Histogram.labels` made them before: a rate over
# a restarted worker's first batch counts it.
for _outcome in Outcome:
    ATTEMPT_SECONDS.touch(_outcome.value)
# Only subscriptions with work queued here have a series (removed when their queue empties).
QUEUE_DEPTH = Gauge(
    "webhook_delivery_queue_depth",
    "Deliveries waiting in this worker's in-memory queue of a subscription",
    ["subscription"],
)
_SUCCEEDED = ATTEMPTS.labels(AttemptOutcome.SUCCEEDED.value)
_FAILED = ATTEMPTS.labels(AttemptOutcome.FAILED.value)

# Outcomes are written (and events acknowledged) at most this often: each write has a fixed
# cost, and nothing waits on it but the acknowledgement.
FLUSH_INTERVAL_SECONDS = 0.2
FLUSH_BATCH = 1000
CLAIM_PAUSE_SECONDS = 0.05
# A kept delivery's row falls due for every worker's claim this long after it is stored (a
# worker that dies leaves its kept deliveries to the others then); this worker sends it only
# while its attempt, timeout and this margin included, ends before.
KEEP_SECONDS = 60.0
KEEP_MARGIN_SECONDS = 5.0
# At most this many times `DISPATCH_BACKLOG` deliveries are kept (a job holds its payload and
# body: about a kilobyte or two); beyond, set-aside deliveries are due at once, for the claims.
KEEP_PER_BACKLOG = 4
# Ordered delivery (README "Ordered delivery by key"): a claim leases each free key's run of
# at most this many deliveries, sent one after another in one slot while each succeeds.
ORDERED_RUN = 100
# Keys an ordered claim looks at, per delivery it may claim (a bounded scan, round robin).
ORDERED_SCAN_PER_SLOT = 4
# An ordered claim takes up to this many times a subscription's slots in keys: the runs beyond
# its free slots wait in its queue here and start as slots free, instead of a slot idling until
# the next claim (a run is often one delivery while the backlog is still being stored).
ORDERED_AHEAD = 4
# The watermark (how far every dispatcher has stored) is asked for at most this often, and
# the claim loop looks again this soon while stored heads wait for it.
WATERMARK_SECONDS = 0.02
# The engine's loops as the worker's `/readyz` names them when they make no progress.
CLAIM_LOOP = "delivery-claims"
RECORDING_LOOP = "delivery-recording"
# Told that `loop` completed an iteration and may now wait up to `wait` seconds.
Progress = Callable[[str, float], None]
# Given the ids of the subscriptions whose deliveries a recorded batch changed.
Announce = Callable[[Set[uuid.UUID]], Awaitable[None]]
# The stream sequence up to which every event's deliveries are stored (the dispatch
# consumer's ack floor: an event is acknowledged only once they all are).
Watermark = Callable[[], Awaitable[int]]


def _first_line(exc: BaseException) -> str:
    """An error's first line, bounded: what a log line says of it."""
    lines = str(exc).splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"[:300]


def _take_run(head: DeliveryJob) -> list[DeliveryJob]:
    rest, head.then = head.then or [], None
    return rest


def observe(batch: list[AttemptResult]) -> None:
    """The operators' metrics of a recorded batch."""
    durations: dict[Outcome, list[float]] = {}
    lags = []
    for result in batch:
        outcome = result.outcome
        seconds = result.duration_ms / 1000
        if outcome is Outcome.DELIVERED:
            sent = result.job.event_time
            # A producer's time without an offset is UTC (as the delivery row stores it).
            sent = sent if sent.tzinfo else sent.replace(tzinfo=UTC)
            lags.append((result.attempted_at - sent).total_seconds() + seconds)
        durations.setdefault(outcome, []).append(seconds)
    for outcome, values in durations.items():
        ATTEMPT_SECONDS.observe_many(values, outcome.value)
    if lags:
        LAG_SECONDS.observe_many(lags)
    _SUCCEEDED.inc(len(lags))
    _FAILED.inc(len(batch) - len(lags))


def show_queue_depths(depths: dict[uuid.UUID, int], shown: set[str]) -> set[str]:
    """Set the queue-depth gauge to `depths`, removing the series of subscriptions `shown`
    before and no longer queued (a bounded label set); returns the subscriptions shown now."""
    now = {str(subscription): depth for subscription, depth in depths.items()}
    for gone in shown - now.keys():
        QUEUE_DEPTH.remove(gone)
    for subscription, depth in now.items():
        QUEUE_DEPTH.labels(subscription).set(depth)
    return set(now)


class DeliveryEngine:
    def __init__(
        self,
        store: DeliveryStore,
        settings: Settings,
        sender: WebhookSender,
        announce: Announce | None = None,
        watermark: Watermark | None = None,
    ) -> None:
        # Every read and write of deliveries (delivery_engine/store.py).
        self._store = store
        # Tells the portal's live views which subscriptions' deliveries a batch changed.
        self._announce = announce
        self._settings = settings
        self._sender = sender
        # Which delivery goes next (queues, caps, fair shares): pure, in scheduling.py.
        self._scheduler = Scheduler(
            capacity=settings.delivery_concurrency,
            per_subscription=settings.per_subscription_concurrency,
            owner_floor=settings.owner_concurrency_floor,
        )
        self._room = asyncio.Event()
        # The event message behind each admitted delivery not stored yet, by the delivery id's
        # `int` (a UUID key costs each lookup a Python call; see `Scheduler`).
        self._tickets: dict[int, EventTicket] = {}
        self._results: list[AttemptResult] = []
        self._set_aside: list[DeliveryJob] = []
        # Circuit breakers (decisions.py): the deliveries of a subscription whose attempts
        # fail in a row are held (stored, not attempted) but for one probe at a time; when
        # one succeeds, its held deliveries are made due at once (`_resumed`, at the next
        # flush).
        self._breakers = Breakers(
            BreakerRules(
                settings.circuit_breaker_failures,
                settings.circuit_probe_seconds,
                settings.circuit_probe_max_seconds,
            )
        )
        self._held: list[DeliveryJob] = []
        self._resumed: set[uuid.UUID] = set()
        # Deliveries set aside and stored but kept here to send (`flush`): per subscription,
        # oldest first, with the wall-clock time their row falls due for every worker's claim.
        self._kept: dict[int, deque[tuple[float, DeliveryJob]]] = {}
        self._kept_count = 0
        self._results_ready = asyncio.Event()
        # Woken by new due deliveries (NOTIFY) and by finished attempts when the last claim
        # left due deliveries for want of a slot (`wake_claims_on_free_slot`).
        self._wake = store.due_listener(settings.delivery_poll_seconds)
        # The last claim left due deliveries for want of room: a finished attempt may make some.
        self._claim_held_back = False
        # The last claim leased deliveries of rate-limited subscriptions: claim again when
        # their buckets hold a token again, not at the poll (`rate_limit.next_claim_in`).
        self._pace: float | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._depth_labels: set[str] = set()
        # Ordered delivery: where the watermark comes from, its last value and when it was
        # read; where the next ordered claim's scan of keys goes on; whether stored heads
        # wait for the watermark (the claim loop then looks again soon).
        self._watermark_source = watermark
        self._watermark = 0
        self._watermark_read = 0.0
        self._ordered_after: tuple[str, str] | None = None
        self._ordered_waiting = False
        self._stopping = False
        self.activity = DeliveryActivity(
            RetryRules(
                settings.retry_schedule_seconds,
                settings.retry_jitter,
                settings.retry_after_cap_seconds,
            ),
            settings.delivery_log_interval_seconds,
            time.monotonic(),
        )

    # --- new events, from dispatch ------------------------------------------------------

    def ticket_of(self, delivery_id: uuid.UUID) -> EventTicket | None:
        """The event message behind a delivery in this worker's hands and not stored yet."""
        return self._tickets.get(delivery_id.int)

    def admit(self, ticket: EventTicket, jobs: list[DeliveryJob]) -> None:
        """The first attempts of one event's deliveries; its message is acknowledged once
        they are all stored."""
        now = time.monotonic()
        ticket.outstanding += len(jobs)
        for job in jobs:
            self._tickets[job.delivery_id.int] = ticket
            if job.order_key is not None:
                # Ordered: stored, and sent in its key's turn by the ordered claim.
                self._set_aside.append(job)
                self._results_ready.set()
                self._ordered_waiting = True
            elif job.rate_limited:
                # Stored pending, then claimed as its subscription's shared bucket allows.
                self._set_aside.append(job)
                self._results_ready.set()
            else:
                self.offer(job, now)

    def offer(self, job: DeliveryJob, now: float) -> None:
        """Start the job if its subscription and its owner have room, else queue it; held
        instead while its subscription's breaker is open (but for a probe)."""
        if self._breakers and self._breakers.admit(job, time.time()) is Admission.HOLD:
            self._hold([job])
            return
        if self._scheduler.offer(job, now):
            self._start(job)

    def _hold(self, jobs: list[DeliveryJob]) -> None:
        self._held.extend(jobs)
        self._results_ready.set()

    async def room(self) -> None:
        """Wait while the queues hold as many deliveries as dispatch may leave waiting."""
        while self._scheduler.waiting >= self._settings.dispatch_backlog:
            self._room.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._room.wait(), 1.0)

    def set_aside_stale(self, now: float) -> None:
        """Deliveries that waited too long for their subscription (a slow endpoint) are stored
        as pending instead, so their events can be acknowledged; a claim loop sends them."""
        aside, started = self._scheduler.stale(now - self._settings.dispatch_queue_seconds)
        for job in started:
            self._start(job)
        if aside:
            self._set_aside.extend(aside)
            self._results_ready.set()
        if self._scheduler.waiting < self._settings.dispatch_backlog:
            self._room.set()

    def set_aside_all(self) -> None:
        """Everything waiting here goes back to the database (on the way out): kept
        deliveries too, their leases released."""
        self.set_aside_stale(float("inf"))
        for queue in self._kept.values():
            self._set_aside.extend(job for _, job in queue)
        self._kept.clear()
        self._kept_count = 0

    # --- due deliveries, from the database -------------------------------------------------

    async def claim(self) -> list[DeliveryJob]:
        limits = self._scheduler.claim_limits(self._settings.delivery_claim_batch)
        if limits.limit <= 0:
            self._claim_held_back = wake_claims_on_free_slot(limits, [], False)
            return []
        held, probing = self._breakers.claim_view(time.time())
        rows, excluded_due = await self._store.claim(
            held=[str(s) for s in held],
            probing=[str(s) for s in probing],
            saturated=[str(s) for s in limits.saturated],
            saturated_owners=limits.saturated_owners,
            per_subscription=self._settings.per_subscription_concurrency,
            per_owner=limits.per_owner,
            limit=limits.limit,
            lease_extra=self._settings.delivery_lease_extra_seconds,
        )
        self._claim_held_back = wake_claims_on_free_slot(
            limits, [(row.subscription_id, row.owner) for row in rows], excluded_due
        )
        self._pace = next_claim_in(
            (row.rate_limit_per_second for row in rows if row.rate_limit_per_second),
            0.0,
            self._settings.delivery_poll_seconds,
        )
        ordered_rows: list[Any] = []
        if self._watermark_source is not None and len(rows) < limits.limit:
            ahead = self._settings.per_subscription_concurrency * ORDERED_AHEAD
            queued = self._scheduler.queue_depths()
            full = [subscription for subscription, n in queued.items() if n >= ahead]
            try:
                ordered_rows = await self._claim_ordered(
                    limits, limits.limit - len(rows), [*held, *full], ahead
                )
            except Exception as exc:
                # The deliveries leased above go out all the same (dropped here, they would
                # wait for their leases to end); the ordered claim tries again next round.
                logger.warning("could not claim ordered deliveries", error=repr(exc))
        now = datetime.now(UTC)
        jobs: list[DeliveryJob] = []
        unreadable: dict[str, str] = {}
        for row in rows:
            try:
                jobs.append(self._job(row, now))
            except Exception as exc:
                # Claimed again at every lease's end, it would fail the same way for ever.
                logger.exception(
                    "claimed delivery could not be read; failed", delivery_id=str(row.id)
                )
                unreadable[str(row.id)] = (
                    f"the stored delivery could not be read ({type(exc).__name__})"
                )
        if ordered_rows:
            jobs += self._runs(ordered_rows, now, unreadable)
        if unreadable:
            try:
                await self._store.fail_unreadable(unreadable)
            except Exception as exc:
                # They are claimed again when their leases end; the others go out now.
                logger.warning("could not fail unreadable deliveries", error=repr(exc))
        return jobs

    async def _claim_ordered(
        self, limits: ClaimLimits, room: int, excluded: list[uuid.UUID], ahead: int
    ) -> list[Any]:
        """Lease the runs of up to `room` keys of ordered subscriptions whose turn it is
        (`store.CLAIM_ORDERED`), below a watermark read at most every `WATERMARK_SECONDS`
        while ordered deliveries are pending."""
        assert self._watermark_source is not None
        now = time.monotonic()
        if self._ordered_waiting and now - self._watermark_read >= WATERMARK_SECONDS:
            try:
                self._watermark = await self._watermark_source()
                self._watermark_read = now
            except Exception as exc:
                # The old watermark stays true (it only grows): fewer heads are free.
                logger.warning("could not read the ordered watermark", error=repr(exc))
        claim = await self._store.claim_ordered(
            watermark=self._watermark,
            after=self._ordered_after,
            excluded=[str(s) for s in excluded],
            saturated_owners=limits.saturated_owners,
            per_subscription=ahead,
            per_owner=max(limits.per_owner, ahead),
            limit=room,
            run=ORDERED_RUN,
            scan=room * ORDERED_SCAN_PER_SLOT,
            lease_extra=self._settings.delivery_lease_extra_seconds,
        )
        # Round robin: a scan cut short goes on after its last key; one that saw every key
        # starts from the first.
        scanned_all = claim.scanned < room * ORDERED_SCAN_PER_SLOT
        self._ordered_after = None if scanned_all else claim.last
        self._ordered_waiting = claim.scanned > 0
        if claim.beyond and not self._stopping:
            # Heads stored but beyond the watermark: look again soon, not at the next poll.
            self._watermark_read = min(self._watermark_read, now - WATERMARK_SECONDS)
            self._wake_soon()
        return claim.rows

    def _wake_soon(self) -> None:
        loop = asyncio.get_running_loop()
        loop.call_later(WATERMARK_SECONDS, self._wake.wake)

    def _runs(
        self, rows: list[Any], now: datetime, unreadable: dict[str, str]
    ) -> list[DeliveryJob]:
        """The claimed ordered rows as jobs, one per key: its head, carrying the key's run
        behind it (`then`), in sequence order. A row that cannot be read ends its key's run
        there (it is failed; the rest of the run is released)."""
        runs: dict[tuple[uuid.UUID, str], list[Any]] = {}
        for row in rows:
            runs.setdefault((row.subscription_id, row.order_key), []).append(row)
        lease_end = time.time() + self._settings.delivery_lease_extra_seconds
        heads: list[DeliveryJob] = []
        for run in runs.values():
            run.sort(key=lambda row: row.order_seq)
            jobs: list[DeliveryJob] = []
            for n, row in enumerate(run):
                try:
                    job = self._job(row, now)
                except Exception as exc:
                    logger.exception(
                        "claimed delivery could not be read; failed", delivery_id=str(row.id)
                    )
                    unreadable[str(row.id)] = (
                        f"the stored delivery could not be read ({type(exc).__name__})"
                    )
                    self._release_rows(run[n + 1 :], now)
                    break
                job.order_key, job.order_seq = row.order_key, row.order_seq
                job.lease_end = lease_end + 2 * job.timeout_seconds
                jobs.append(job)
            if jobs:
                jobs[0].then = jobs[1:] or None
                heads.append(jobs[0])
        return heads

    def _release_rows(self, rows: list[Any], now: datetime) -> None:
        for row in rows:
            with contextlib.suppress(Exception):
                self._set_aside.append(self._job(row, now))

    def _next_in_run(self, done: DeliveryJob, succeeded: bool) -> DeliveryJob | None:
        """The next delivery of `done`'s key, if `done` succeeded and it may still go out
        from here before its lease ends; otherwise the rest of the run is released."""
        rest, done.then = done.then, None
        if not rest:
            return None
        head = rest[0]
        if (
            succeeded
            and not self._stopping
            and time.time() + head.timeout_seconds + KEEP_MARGIN_SECONDS < done.lease_end
            and not (self._breakers and self._breakers.is_open(done.subscription_id))
        ):
            head.then = rest[1:] or None
            head.lease_end = done.lease_end
            return head
        self._set_aside.extend(rest)
        self._results_ready.set()
        return None

    def _job(self, row: Any, now: datetime) -> StoredDelivery:
        return StoredDelivery(
            delivery_id=row.id,
            subscription_id=row.subscription_id,
            event_type=row.event_type,
            event_time=row.event_time,
            payload_json=row.payload_json.encode(),
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
            traceparent=row.traceparent,
            tracestate=row.tracestate,
            send_trace_context=row.send_trace_context,
            retry_schedule=row.retry_schedule,
            rate_limited=row.rate_limit_per_second is not None,
        )

    # --- sending -------------------------------------------------------------------------

    def _start(self, job: DeliveryJob) -> None:
        """Send the job in a task of its own (the scheduler took its slot)."""
        task = asyncio.create_task(self._send(job))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send(self, job: DeliveryJob) -> None:
        """One slot: sends this job, then (while it has room) its subscription's waiting ones
        (a task per slot, not per delivery)."""
        current: DeliveryJob | None = job
        try:
            while current is not None:
                try:
                    result = await self._sender.attempt(current)
                except Exception as exc:
                    # The sender turns every answer and network error into a result; anything
                    # else is a defect, and must not end the slot or lose the delivery.
                    logger.exception(
                        "delivery attempt raised; recorded as a failed attempt",
                        **current.log_fields(),
                    )
                    result = attempt_that_raised(current, datetime.now(UTC), exc)
                self._results.append(result)
                self._results_ready.set()
                if self._breakers or not result.succeeded:
                    self._breaker_after(result)
                done, current = current, None
                if done.then is not None:
                    # An ordered run: the slot passes to the key's next delivery.
                    current = self._next_in_run(done, result.succeeded)
                    if current is not None:
                        continue
                current, others = self._scheduler.finish(done)
                if current is None and self._kept and not others:
                    # The slot passes to the subscription's next kept delivery, in this task.
                    current = self._kept_for(done)
                for other in others:
                    self._start(other)
                if self._scheduler.waiting < self._settings.dispatch_backlog:
                    self._room.set()
        except BaseException:
            if current is not None:  # its slot is still held
                for other in self._scheduler.abandon(current):
                    self._start(other)
            raise
        finally:
            if self._claim_held_back:
                self._wake.wake()

    def _breaker_after(self, result: AttemptResult) -> None:
        """Tell the subscription's breaker how an attempt ended: when it opens, the jobs
        queued for the subscription are held; when it closes, its held deliveries are due at
        once (resumed with the next flush)."""
        job = result.job
        opened, closed = self._breakers.record(job, result.succeeded, time.time())
        if opened:
            logger.warning(
                "subscription's attempts fail in a row; its deliveries are held, probed",
                subscription_id=str(job.subscription_id),
            )
            self._hold(self._scheduler.take_queue(job.subscription_id))
        if closed:
            logger.info(
                "subscription's probe succeeded; its held deliveries are due",
                subscription_id=str(job.subscription_id),
            )
            self._resumed.add(job.subscription_id)
            self._results_ready.set()

    # --- kept deliveries ----------------------------------------------------------------

    def _keep(self, jobs: list[FirstAttempt]) -> None:
        """Deliveries set aside and now stored, leased to this worker: sent from here as
        their subscription's slots free (stored now: their outcome updates their row)."""
        due = time.time() + KEEP_SECONDS
        for job in jobs:
            self._kept.setdefault(job.subscription_id.int, deque()).append((due, job.as_stored()))
        self._kept_count += len(jobs)

    def _next_kept(self, key: int, now: float) -> DeliveryJob | None:
        """The subscription's next kept delivery that may still go out from here, or None.
        One that could still be in flight when its lease ends (then any worker may claim it:
        sent twice) goes back to the claims instead, its lease released."""
        queue = self._kept.get(key)
        while queue:
            due, job = queue.popleft()
            self._kept_count -= 1
            if now + job.timeout_seconds + KEEP_MARGIN_SECONDS < due:
                if not queue:
                    del self._kept[key]
                return job
            self._set_aside.append(job)
        self._kept.pop(key, None)
        return None

    def release_late_kept(self, now: float) -> None:
        """Kept deliveries this worker could not send before their leases end go back to the
        claims now, for any worker with room, rather than when the lease ends."""
        for key in list(self._kept):
            queue = self._kept[key]
            while queue and now + queue[0][1].timeout_seconds + KEEP_MARGIN_SECONDS >= queue[0][0]:
                self._set_aside.append(queue.popleft()[1])
                self._kept_count -= 1
            if not queue:
                del self._kept[key]

    def _kept_for(self, done: DeliveryJob) -> DeliveryJob | None:
        """The next kept delivery of `done`'s subscription, its slot taken, if it has room."""
        key = done.subscription_id.int
        queue = self._kept.get(key)
        if not queue or not self._scheduler.has_room(done):
            return None
        if self._breakers and self._breakers.is_open(done.subscription_id):
            return None
        job = self._next_kept(key, time.time())
        if job is None or not self._scheduler.offer(job, time.monotonic()):
            return None
        return job

    def start_kept(self) -> None:
        """Start kept deliveries whose subscriptions have room and nothing queued (a free
        slot of theirs otherwise passes to the queue, as it would to a claim)."""
        now = time.time()
        for key in list(self._kept):
            while key in self._kept:
                head = self._kept[key][0][1]
                if not self._scheduler.has_room(head) or (
                    self._breakers and self._breakers.is_open(head.subscription_id)
                ):
                    break
                job = self._next_kept(key, now)
                if job is not None:
                    self.offer(job, time.monotonic())

    # --- recording -----------------------------------------------------------------------

    async def flush(self) -> int:
        """Write the results gathered so far (and what was set aside), then acknowledge the
        events that are stored in full. When the database is unreachable all is kept and
        retried; anything else is the batch's own doing, and one item must not hold up the
        others: they are then recorded one by one (`_record_one_by_one`)."""
        if not self._results and not self._set_aside and not self._held and not self._resumed:
            return 0
        batch, self._results = self._results[:FLUSH_BATCH], self._results[FLUSH_BATCH:]
        # Held deliveries are set aside too: stored pending (or released), but due only once
        # their subscription's breaker closes or after its longest wait between probes.
        held, self._held = self._held[:FLUSH_BATCH], self._held[FLUSH_BATCH:]
        waited, self._set_aside = self._set_aside[:FLUSH_BATCH], self._set_aside[FLUSH_BATCH:]
        aside = waited + held
        # An ordered run set aside or held before it went out: its key's leased deliveries
        # behind the head are released with it.
        aside += [job for head in aside if head.then for job in _take_run(head)]
        hold = self._settings.circuit_probe_max_seconds
        due_in = {
            job.delivery_id.int: (hold, 0.0)
            for job in held
            if self._breakers.is_open(job.subscription_id)
        }
        # New deliveries set aside are kept in this worker's hands while there is room: stored
        # leased to it for `KEEP_SECONDS`, sent from memory as their subscription's slots
        # free, so the row is written twice (set aside, outcome), not three times and claimed.
        room = KEEP_PER_BACKLOG * self._settings.dispatch_backlog - self._kept_count
        # Not those of rate-limited subscriptions (only a claim may send them: it spends the
        # tokens), nor ordered ones (sent in their key's turn by the ordered claim).
        kept = [
            job
            for job in waited
            if isinstance(job, FirstAttempt) and not job.rate_limited and job.order_key is None
        ][: max(room, 0)]
        # Due when the lease ends (as claims lease): not in the claims' scans before.
        due_in.update((job.delivery_id.int, (KEEP_SECONDS, KEEP_SECONDS)) for job in kept)
        resumed, self._resumed = self._resumed, set()
        refused: list[DeliveryJob] = []
        try:
            disabled = await self._record(batch, aside, due_in, resumed)
        except Exception as exc:
            if is_outage(exc):
                self._results = batch + self._results
                self._set_aside = waited + self._set_aside
                self._held = held + self._held
                self._resumed |= resumed
                raise
            # The resumption goes with the next flush; the rest is recorded item by item (held
            # ones due at once: a fall-back).
            self._resumed |= resumed
            # The batch's own doing (a value refused, a result that cannot be read): the same
            # write would fail the same way again, holding up every outcome behind it.
            batch, aside, refused = await self._record_one_by_one(batch, aside)
        else:
            self._keep(kept)
            if any(job.rate_limited and isinstance(job, FirstAttempt) for job in waited):
                # This worker claims them as the bucket allows; others at their poll.
                self._wake.wake()
            if self._watermark_source is not None and any(
                job.order_key is not None and isinstance(job, FirstAttempt) for job in aside
            ):
                # Ordered deliveries stored: their keys' turns come once the watermark
                # passes them (their events are acknowledged just below).
                self._ordered_waiting = True
            if self._ordered_waiting and self._watermark_source is not None:
                # Ordered deliveries stored, or a key's head done: its next may go (once the
                # event is acknowledged, which the watermark then shows).
                self._wake.wake()
                self._wake_soon()
            # A disabled subscription's kept deliveries wait in the database, as its other
            # pending ones do (their leases end; claims skip inactive subscriptions).
            for subscription_id in disabled:
                self._kept_count -= len(self._kept.pop(subscription_id.int, ()))
        try:
            observe(batch)  # once recorded, so a retried flush counts nothing twice
            self.activity.record(batch)
        except Exception as exc:
            # Metrics and log lines only: the outcomes are stored, their events are acked.
            logger.exception("could not count a recorded batch", error=repr(exc))
        stored_in_full = []
        for job in (*(result.job for result in batch), *aside, *refused):
            ticket = self._tickets.pop(job.delivery_id.int, None)
            if ticket is not None and ticket.settle_one():
                stored_in_full.append(ticket.msg)
        await ack_all(stored_in_full)
        if self._announce is not None:
            try:
                await self._announce(
                    {job.subscription_id for job in (*(r.job for r in batch), *aside)}
                )
            except Exception as exc:
                # The portal's live views only: they look again at the next announcement.
                logger.warning("could not announce recorded deliveries", error=repr(exc))
        return len(batch) + len(aside)

    async def _record(
        self,
        batch: list[AttemptResult],
        aside: list[DeliveryJob],
        due_in: dict[int, tuple[float, float]] | None = None,
        resumed: Set[uuid.UUID] = frozenset(),
    ) -> list[uuid.UUID]:
        return await self._store.record(batch, aside, due_in, resumed)

    async def _record_one_by_one(
        self, batch: list[AttemptResult], aside: list[DeliveryJob]
    ) -> tuple[list[AttemptResult], list[DeliveryJob], list[DeliveryJob]]:
        """Each result and set-aside delivery in a transaction of its own. A result that
        cannot be recorded (the database refuses a value, or its answer makes the decision
        raise) is recorded as a failed attempt without its answer (`unrecordable`), so its
        delivery keeps its retries; what cannot be recorded even so is left out, with an error
        line naming it. Returns what was recorded (the replacements in place of their results)
        and the jobs left out; when the database is unreachable, what is not recorded yet
        waits for the next flush."""
        units: list[tuple[list[AttemptResult], list[DeliveryJob], DeliveryJob]]
        units = [([result], [], result.job) for result in batch]
        units += [([], [job], job) for job in aside]
        recorded: list[AttemptResult] = []
        recorded_aside: list[DeliveryJob] = []
        refused: list[DeliveryJob] = []
        for n, (results, jobs, job) in enumerate(units):
            try:
                try:
                    await self._record(results, jobs)
                except Exception as exc:
                    if is_outage(exc) or not results:
                        raise
                    replacement = unrecordable(results[0], exc)
                    await self._record([replacement], [])
                    logger.error(
                        "delivery answer could not be recorded; recorded as a failed attempt",
                        **job.log_fields(),
                        error=_first_line(exc),
                    )
                    results = [replacement]
            except Exception as exc:
                if is_outage(exc):
                    # The database itself (a restart): the rest waits for the next flush; what
                    # is recorded is acknowledged now.
                    logger.warning("could not record delivery outcomes; retrying", error=repr(exc))
                    self._results = [r for rs, _, _ in units[n:] for r in rs] + self._results
                    self._set_aside = [j for _, js, _ in units[n:] for j in js] + self._set_aside
                    break
                refused.append(job)
                logger.error(
                    "delivery outcome could not be recorded; left out",
                    **job.log_fields(),
                    error=_first_line(exc),
                )
                continue
            recorded += results
            recorded_aside += jobs
        return recorded, recorded_aside, refused

    def _show_queue_depths(self) -> None:
        self._depth_labels = show_queue_depths(self._scheduler.queue_depths(), self._depth_labels)

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

    async def _flush_loop(self, stop: asyncio.Event, progress: Progress) -> None:
        progress(RECORDING_LOOP, 0.5)
        while not stop.is_set() or self._results or self._set_aside or self._held or self._tasks:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._results_ready.wait(), 0.5)
            self._results_ready.clear()
            await asyncio.sleep(FLUSH_INTERVAL_SECONDS)
            now = time.monotonic()
            self.set_aside_stale(now)
            if self._kept:
                self.release_late_kept(time.time())
                self.start_kept()
            self._show_queue_depths()
            try:
                # A full batch means more results are waiting: record them all.
                flushed = FLUSH_BATCH
                while flushed >= FLUSH_BATCH:
                    flushed = await self.flush()
                progress(RECORDING_LOOP, 0.5)
            except Exception as exc:
                logger.warning("could not record delivery outcomes; retrying", error=repr(exc))
                await asyncio.sleep(1.0)
            done = (
                stop.is_set()
                and not self._tasks
                and not self._results
                and not self._set_aside
                and not self._held
            )
            self.activity.report(time.monotonic(), force=done)
            if done:
                return

    async def run(
        self, stop: asyncio.Event, progress: Progress = lambda _loop, _wait: None
    ) -> None:
        """Claim and send until `stop`; `progress(loop, wait)` is told each completed
        iteration of the claim loop and of the recording loop (the worker's `/readyz`)."""
        flusher = asyncio.create_task(self._flush_loop(stop, progress))
        progress(CLAIM_LOOP, self._settings.delivery_poll_seconds)
        self._wake.start()
        keeper = asyncio.create_task(self._keep_events_claimed(stop))
        try:
            while not stop.is_set():
                try:
                    jobs = await self.claim()
                    progress(CLAIM_LOOP, self._settings.delivery_poll_seconds)
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
                await self._wake.wait(self._pace)
        finally:
            self._stopping = True  # ordered runs stop after the attempt in flight
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
