"""This worker's circuit breakers, one per subscription with failures since its last success
(the rules are decisions.py's `admission` and `after_attempt`; this keeps their state).

Each worker keeps its own: what it counts are its own attempts, and what it holds are the
deliveries in its hands. The database is shared through the claim (held subscriptions are
left out of this worker's claims, a probing one limited to one delivery) and through the
resumption of a closed breaker's held deliveries (store.py)."""

from __future__ import annotations

import uuid

from webhook_hub.delivery_engine.decisions import (
    Admission,
    Breaker,
    BreakerRules,
    admission,
    after_attempt,
    probe_sent,
)
from webhook_hub.delivery_engine.jobs import DeliveryJob

# A probe holds the others back for its timeout and this much more (its result is recorded
# a moment after it ends): a probe lost without a result does not hold them for good.
PROBE_MARGIN_SECONDS = 5.0


class Breakers:
    def __init__(self, rules: BreakerRules) -> None:
        self.rules = rules
        # By the subscription id's `int`, as the scheduler keys them.
        self._state: dict[int, Breaker] = {}

    def __bool__(self) -> bool:
        """Whether any subscription has failures here (otherwise nothing is held)."""
        return bool(self._state)

    def admit(self, job: DeliveryJob, now: float) -> Admission:
        """Whether `job` goes out, as the probe, or is held; a probe is marked as sent."""
        key = job.subscription_id.int
        breaker = self._state.get(key)
        verdict = admission(breaker, now)
        if verdict is Admission.PROBE and breaker is not None:
            self._state[key] = probe_sent(
                breaker, job.delivery_id.int, now, job.timeout_seconds + PROBE_MARGIN_SECONDS
            )
        return verdict

    def record(self, job: DeliveryJob, succeeded: bool, now: float) -> tuple[bool, bool]:
        """An attempt of `job` ended: returns whether its subscription's breaker opened and
        whether it closed."""
        key = job.subscription_id.int
        before = self._state.get(key)
        if before is None and succeeded:
            return False, False
        after, closed = after_attempt(before, job.delivery_id.int, succeeded, now, self.rules)
        if after is None:
            self._state.pop(key, None)
        else:
            self._state[key] = after
        opened = after is not None and after.open and (before is None or not before.open)
        return opened, closed

    def is_open(self, subscription_id: uuid.UUID) -> bool:
        breaker = self._state.get(subscription_id.int)
        return breaker is not None and breaker.open

    def claim_view(self, now: float) -> tuple[list[uuid.UUID], list[uuid.UUID]]:
        """The subscriptions a claim leaves out (held) and those it may take one delivery of
        (a probe is due)."""
        held: list[uuid.UUID] = []
        probing: list[uuid.UUID] = []
        for key, breaker in self._state.items():
            verdict = admission(breaker, now)
            if verdict is Admission.HOLD:
                held.append(uuid.UUID(int=key))
            elif verdict is Admission.PROBE:
                probing.append(uuid.UUID(int=key))
        return held, probing
