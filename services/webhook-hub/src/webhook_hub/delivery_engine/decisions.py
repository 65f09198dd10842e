"""What an attempt's answer means and what happens next: pure decisions, no I/O.

An attempt ends in one `Outcome`; the outcome, the attempts made and the retry rules give
the delivery's next step (done, retry at a time, or given up), and a batch of outcomes gives
each subscription's tally of consecutive failures, from which `subscriptions.disabling`
decides whether to disable it. A subscription whose attempts fail in a row has its
deliveries held by a circuit breaker (`Breaker`), which lets one probe through at a time.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum

# `Outcome`, `outcome_of` and `NextStep` are carried by an attempt's result, so they are
# defined beside it (jobs.py) and named here too, with the decisions that make them.
from webhook_hub.delivery_engine.jobs import AttemptResult, DeliveryJob, Failure
from webhook_hub.delivery_engine.jobs import NextStep as NextStep
from webhook_hub.delivery_engine.jobs import Outcome as Outcome
from webhook_hub.delivery_engine.jobs import outcome_of as outcome_of
from webhook_hub.delivery_engine.policy import next_attempt_delay, parse_retry_after
from webhook_hub.models import DeliveryStatus


@dataclass(frozen=True)
class RetryRules:
    # The service's schedule: a job that carries its own (`DeliveryJob.retry_schedule`) uses it.
    schedule: Sequence[float]
    jitter: float
    retry_after_cap: float


def next_step(
    result: AttemptResult, rules: RetryRules, rng: random.Random | None = None
) -> NextStep:
    """The delivery's state after `result`: succeeded, failed for good (410 Gone, or the
    schedule is spent), or pending until the next attempt (no sooner than `Retry-After`).
    The schedule is the job's when it carries one (its subscription's or owner's), else the
    rules'; jitter and the `Retry-After` cap are the rules' either way."""
    at = result.attempted_at
    outcome = result.outcome
    if outcome is Outcome.DELIVERED:
        return NextStep(DeliveryStatus.SUCCEEDED, None, at)
    if outcome is Outcome.GONE:
        return NextStep(DeliveryStatus.FAILED, None, at)
    retry_after = None
    if outcome is Outcome.THROTTLED:
        retry_after = parse_retry_after(result.retry_after, at)
    schedule = result.job.retry_schedule
    delay = next_attempt_delay(
        result.job.attempts + 1,
        rules.schedule if schedule is None else schedule,
        rules.jitter,
        retry_after=retry_after,
        retry_after_cap=rules.retry_after_cap,
        rng=rng,
    )
    if delay is None:
        return NextStep(DeliveryStatus.FAILED, None, at)
    return NextStep(DeliveryStatus.PENDING, at + timedelta(seconds=delay), None)


def decided(result: AttemptResult, rules: RetryRules) -> NextStep:
    """`result`'s next step, decided by `next_step` the first time it is asked (as the
    attempt is recorded) and carried by the result after: the log line says what was
    stored, jitter included, and nothing decides it twice."""
    step = result.step
    if step is None:
        step = result.step = next_step(result, rules)
    return step


def attempt_that_raised(job: DeliveryJob, at: datetime, exc: BaseException) -> AttemptResult:
    """The result of an attempt of `job` made at `at` that raised `exc` instead of ending in
    an answer or a network error: a failed attempt with no answer, so the delivery follows its
    retry schedule instead of being lost, and the error says why."""
    return AttemptResult(
        job=job,
        attempted_at=at,
        status_code=None,
        response_body=None,
        duration_ms=0,
        error=f"{type(exc).__name__} in the attempt"[:300],
        retry_after=None,
        failure=Failure.NETWORK,
    )


def unrecordable(result: AttemptResult, exc: BaseException) -> AttemptResult:
    """What is recorded of an attempt whose answer could not be (the database refused a
    value of it, or reading it raised): `attempt_that_raised`'s failed attempt, at the same
    time and duration. A 2xx answer is thereby sent again: at least once, never dropped."""
    replacement = attempt_that_raised(result.job, result.attempted_at, exc)
    replacement.duration_ms = result.duration_ms
    replacement.error = f"the answer could not be recorded ({type(exc).__name__})"
    return replacement


@dataclass
class SubscriptionTally:
    """What a batch of attempts says about one subscription."""

    reset: bool = False  # a success: the stored failure count starts again from `failures`
    failures: int = 0  # consecutive failures after the last success in this batch
    last_success: datetime | None = None
    gone: bool = False  # an endpoint answered 410 Gone


def tally(results: Sequence[AttemptResult]) -> dict[uuid.UUID, SubscriptionTally]:
    """Each subscription's tally over `results`, which are in the order they were made."""
    tallies: dict[uuid.UUID, SubscriptionTally] = {}
    for r in results:
        entry = tallies.get(r.job.subscription_id)
        if entry is None:
            entry = tallies[r.job.subscription_id] = SubscriptionTally()
        if r.succeeded:
            entry.reset, entry.failures, entry.last_success = True, 0, r.attempted_at
        else:
            entry.failures += 1
            entry.gone = entry.gone or r.status_code == 410
    return tallies


# --- the circuit breaker -------------------------------------------------------------------


class Admission(StrEnum):
    """What the engine does with a delivery of a subscription now."""

    SEND = "send"
    PROBE = "probe"  # the one attempt let through while the breaker is open
    HOLD = "hold"  # stored as pending, not attempted, until a probe succeeds


@dataclass(frozen=True)
class BreakerRules:
    failures: int  # consecutive failed attempts that open the breaker
    first_probe: float  # seconds from opening to the first probe
    max_probe: float  # the wait between probes doubles up to this


@dataclass(frozen=True, slots=True)
class Breaker:
    """One subscription's breaker as one worker sees it (times on one clock, in seconds).
    No entry (None) is a closed breaker with no failure since the last success: the common
    case costs a dictionary lookup."""

    failures: int  # consecutive failed attempts seen by this worker
    open: bool = False
    probe_at: float = 0.0  # open: the next probe may start then
    probes_failed: int = 0
    # The delivery sent as the probe, by its id's `int`, and until when it holds the others
    # back (its timeout and a margin: a probe lost without a result does not block for good).
    probe: int | None = None
    probe_until: float = 0.0


def admission(breaker: Breaker | None, now: float) -> Admission:
    """Closed: send. Open: one probe once its time has come and no other is in flight;
    everything else is held."""
    if breaker is None or not breaker.open:
        return Admission.SEND
    if now >= breaker.probe_at and (breaker.probe is None or now >= breaker.probe_until):
        return Admission.PROBE
    return Admission.HOLD


def probe_sent(breaker: Breaker, delivery: int, now: float, timeout: float) -> Breaker:
    """`delivery` goes out as the probe; others wait for its result up to `timeout`."""
    return replace(breaker, probe=delivery, probe_until=now + timeout)


def after_attempt(
    breaker: Breaker | None,
    delivery: int,
    succeeded: bool,
    now: float,
    rules: BreakerRules,
) -> tuple[Breaker | None, bool]:
    """The breaker after an attempt of `delivery` ended, and whether it closed (its held
    deliveries are then due at once). Any success closes it: the endpoint answers. A failure
    adds to the consecutive failures and opens the breaker at `rules.failures`; a failed probe
    sets the next one after a wait that doubles from `first_probe` up to `max_probe`. Other
    attempts that were in flight when it opened change nothing but the count."""
    if succeeded:
        return None, breaker is not None and breaker.open
    failures = (breaker.failures if breaker is not None else 0) + 1
    if breaker is None or not breaker.open:
        if failures < rules.failures:
            return Breaker(failures), False
        return Breaker(failures, open=True, probe_at=now + rules.first_probe), False
    if breaker.probe != delivery:
        return replace(breaker, failures=failures), False
    wait = min(rules.max_probe, rules.first_probe * 2.0 ** min(breaker.probes_failed + 1, 32))
    return (
        Breaker(failures, True, now + wait, breaker.probes_failed + 1),
        False,
    )
