"""Which delivery goes next: per-subscription queues and admission, a pure state machine.

No I/O and no asyncio: the engine asks it what to start and tells it what finished, and it
answers with jobs whose slot it has already taken. Each subscription has a concurrency cap,
so one slow endpoint cannot hold up the others, and each owner a fair share of the worker's
slots (admission.py), so one owner's many slow endpoints cannot hold up other owners. A job
beyond either waits in its subscription's queue, oldest first; one that waits longer than
the engine allows is handed back to be set aside (`stale`).
"""

from __future__ import annotations

import uuid
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass

from webhook_hub.delivery_engine.admission import may_start, owner_share
from webhook_hub.delivery_engine.jobs import DeliveryJob


@dataclass(frozen=True)
class ClaimLimits:
    """What a claim of due deliveries may take now."""

    saturated: list[uuid.UUID]  # subscriptions at their cap
    saturated_owners: list[str]  # owners at their share
    per_owner: int  # what an owner not busy here yet may take
    limit: int  # free slots, at most a claim batch
    # The claim takes less than it could: a finished attempt may make room for more.
    held_back: bool
    per_subscription: int = 0  # the claim's cap on one subscription's deliveries


def wake_claims_on_free_slot(
    limits: ClaimLimits, claimed: Sequence[tuple[uuid.UUID, str]], excluded_due: bool
) -> bool:
    """Whether each finished attempt should wake the claim loop, after a claim that took
    `claimed` (each delivery's subscription and owner). Only when a free slot could let the
    next claim take more: due deliveries were left to subscriptions or owners at their cap
    (`excluded_due`, the database's answer), the claim took all it was allowed with fewer slots
    than a batch, or it cut a subscription or an owner at its cap. Otherwise the claim loop
    sleeps until NOTIFY or its poll: waking it on every finished attempt made a claim every
    50 ms whatever was due (the fixed cost that dominated at low rates)."""
    if limits.limit <= 0:
        return True  # every slot taken: anything due waits for one
    if excluded_due or (limits.held_back and len(claimed) >= limits.limit):
        return True
    per_subscription = Counter(subscription for subscription, _ in claimed)
    per_owner = Counter(owner for _, owner in claimed)
    return any(n >= limits.per_subscription for n in per_subscription.values()) or any(
        n >= limits.per_owner for n in per_owner.values()
    )


class Scheduler:
    """Subscriptions are keyed by their id's `int`: a UUID key costs every lookup a call of
    `UUID.__hash__` (Python), and `__eq__` when the job's id is another object than the
    key's (each fetched batch reads its subscriptions anew), 0.06 to 0.12 µs a lookup more;
    a delivery made about six."""

    def __init__(self, *, capacity: int, per_subscription: int, owner_floor: int) -> None:
        self.capacity = capacity
        self.per_subscription = per_subscription
        self.owner_floor = owner_floor
        # Attempts in flight: per subscription, per owner, in all.
        self._in_flight: dict[int, int] = {}
        self._owner_in_flight: dict[str, int] = {}
        self.in_flight = 0
        # In flight plus waiting, per owner: its keys are the owners with work here.
        self._owner_load: dict[str, int] = {}
        # Waiting jobs, oldest first, per subscription (with when they were offered); and
        # the subscriptions with waiting jobs of each owner, in round-robin order.
        self._waiting: dict[int, deque[tuple[float, DeliveryJob]]] = {}
        self._waiting_of_owner: dict[str, dict[int, None]] = {}
        self.waiting = 0

    # --- questions -------------------------------------------------------------------------

    def queue_depths(self) -> dict[uuid.UUID, int]:
        """Waiting jobs per subscription, for the subscriptions that have some."""
        return {uuid.UUID(int=key): len(queue) for key, queue in self._waiting.items()}

    def admissible(self, owner: str) -> bool:
        active = len(self._owner_load) + (owner not in self._owner_load)
        return may_start(
            owner_in_flight=self._owner_in_flight.get(owner, 0),
            total_in_flight=self.in_flight,
            active_owners=active,
            capacity=self.capacity,
            floor=self.owner_floor,
        )

    def claim_limits(self, batch: int) -> ClaimLimits:
        cap = self.per_subscription
        saturated = [uuid.UUID(int=key) for key, n in self._in_flight.items() if n >= cap]
        saturated_owners = [o for o in self._owner_in_flight if not self.admissible(o)]
        # Claims beyond an owner's room would only wait for a slot.
        per_owner = owner_share(self.capacity, len(self._owner_load) + 1, self.owner_floor)
        limit = max(min(batch, self.capacity - self.in_flight), 0)
        held_back = bool(saturated) or bool(saturated_owners) or limit < batch
        return ClaimLimits(saturated, saturated_owners, per_owner, limit, held_back, cap)

    # --- changes -----------------------------------------------------------------------------

    def has_room(self, job: DeliveryJob) -> bool:
        """Whether `job` would start at once if offered now."""
        key = job.subscription_id.int
        return (
            key not in self._waiting
            and self._in_flight.get(key, 0) < self.per_subscription
            and self.admissible(job.owner)
        )

    def offer(self, job: DeliveryJob, now: float) -> bool:
        """True: start `job` now (its slot is taken); false: it waits in its queue."""
        key = job.subscription_id.int
        if (
            key not in self._waiting
            and self._in_flight.get(key, 0) < self.per_subscription
            and self.admissible(job.owner)
        ):
            self._take_slot(job)
            return True
        queue = self._waiting.get(key)
        if queue is None:
            queue = self._waiting[key] = deque()
            self._waiting_of_owner.setdefault(job.owner, {})[key] = None
        queue.append((now, job))
        self.waiting += 1
        self._add_load(job.owner)
        return False

    def finish(self, job: DeliveryJob) -> tuple[DeliveryJob | None, list[DeliveryJob]]:
        """`job`'s attempt is over: its slot is free. Returns the job to send next in the same
        task (its subscription's next one, when no other owner waits: the common case, kept
        cheap) and the jobs to start in tasks of their own; their slots are taken."""
        owner, key = job.owner, job.subscription_id.int
        queue = self._waiting.get(key)
        # Only this owner waits, and would have room with this slot free: the slot passes to
        # the subscription's next job. In flight, per subscription and per owner, stays as it
        # is; the owner's load (in flight and waiting) loses the job that ended.
        if (
            queue is not None
            and len(self._waiting_of_owner) == 1
            and may_start(
                owner_in_flight=self._owner_in_flight[owner] - 1,
                total_in_flight=self.in_flight - 1,
                active_owners=len(self._owner_load),
                capacity=self.capacity,
                floor=self.owner_floor,
            )
        ):
            _, next_job = queue.popleft()
            if not queue:
                self._forget_queue(key, owner)
            self.waiting -= 1
            self._remove_load(owner)
            return next_job, []
        self._free_slot(job)
        return None, self.pump() if self.waiting else []

    def abandon(self, job: DeliveryJob) -> list[DeliveryJob]:
        """`job` ended without an outcome (its task was cancelled): free its slot; returns the
        jobs that now start."""
        self._free_slot(job)
        return self.pump() if self.waiting else []

    def stale(self, oldest: float) -> tuple[list[DeliveryJob], list[DeliveryJob]]:
        """Take out the jobs offered at `oldest` or before (to be set aside); returns them and
        the jobs that now start, since fewer owners with work means larger shares."""
        aside: list[DeliveryJob] = []
        for key in [k for k, q in self._waiting.items() if q[0][0] <= oldest]:
            queue = self._waiting[key]
            owner = queue[0][1].owner
            while queue and queue[0][0] <= oldest:
                aside.append(queue.popleft()[1])
                self.waiting -= 1
                self._remove_load(owner)
            if not queue:
                self._forget_queue(key, owner)
        return aside, self.pump() if self.waiting else []

    def take_queue(self, subscription_id: uuid.UUID) -> list[DeliveryJob]:
        """Take out every job waiting for `subscription_id` (its breaker opened: they are
        held instead), oldest first."""
        key = subscription_id.int
        queue = self._waiting.get(key)
        if queue is None:
            return []
        jobs = [job for _, job in queue]
        for job in jobs:
            self._remove_load(job.owner)
        self.waiting -= len(jobs)
        self._forget_queue(key, jobs[0].owner)
        return jobs

    def pump(self) -> list[DeliveryJob]:
        """The waiting jobs that now have room, owner by owner, their slots taken."""
        started: list[DeliveryJob] = []
        cap = self.per_subscription
        for owner in list(self._waiting_of_owner):
            while self.admissible(owner):
                subscriptions = self._waiting_of_owner.get(owner)
                if not subscriptions:
                    break
                # Not iterated on after a take (which may drop the subscription from it).
                ready = next((s for s in subscriptions if self._in_flight.get(s, 0) < cap), None)
                if ready is None:
                    break
                job = self._take_waiting(ready)
                self._take_slot(job)
                started.append(job)
                if ready in subscriptions:  # round robin between an owner's subscriptions
                    del subscriptions[ready]
                    subscriptions[ready] = None
        return started

    # --- bookkeeping -----------------------------------------------------------------------

    def _add_load(self, owner: str) -> None:
        self._owner_load[owner] = self._owner_load.get(owner, 0) + 1

    def _remove_load(self, owner: str) -> None:
        load = self._owner_load[owner] - 1
        if load:
            self._owner_load[owner] = load
        else:
            del self._owner_load[owner]

    def _take_slot(self, job: DeliveryJob) -> None:
        key = job.subscription_id.int
        self._in_flight[key] = self._in_flight.get(key, 0) + 1
        self._owner_in_flight[job.owner] = self._owner_in_flight.get(job.owner, 0) + 1
        self.in_flight += 1
        self._add_load(job.owner)

    def _free_slot(self, job: DeliveryJob) -> None:
        key, owner = job.subscription_id.int, job.owner
        left = self._in_flight[key] - 1
        if left > 0:
            self._in_flight[key] = left
        else:
            del self._in_flight[key]
        left = self._owner_in_flight[owner] - 1
        if left > 0:
            self._owner_in_flight[owner] = left
        else:
            del self._owner_in_flight[owner]
        self.in_flight -= 1
        self._remove_load(owner)

    def _take_waiting(self, key: int) -> DeliveryJob:
        queue = self._waiting[key]
        _, job = queue.popleft()
        if not queue:
            self._forget_queue(key, job.owner)
        self.waiting -= 1
        self._remove_load(job.owner)
        return job

    def _forget_queue(self, key: int, owner: str) -> None:
        del self._waiting[key]
        subscriptions = self._waiting_of_owner[owner]
        del subscriptions[key]
        if not subscriptions:
            del self._waiting_of_owner[owner]
