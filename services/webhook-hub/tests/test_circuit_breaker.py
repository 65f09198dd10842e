"""The circuit breaker's rules (decisions.py) and a worker's breakers (breakers.py): pure, no
database. A subscription whose attempts fail in a row has its deliveries held but for one
probe at a time; a success closes it."""

from __future__ import annotations

import uuid

from webhook_hub.delivery_engine.breakers import PROBE_MARGIN_SECONDS, Breakers
from webhook_hub.delivery_engine.decisions import (
    Admission,
    Breaker,
    BreakerRules,
    admission,
    after_attempt,
    probe_sent,
)
from webhook_hub.delivery_engine.jobs import DeliveryJob
from webhook_hub.delivery_engine.scheduling import Scheduler

from tests.job_factories import make_job

RULES = BreakerRules(failures=3, first_probe=1.0, max_probe=10.0)


def failed(breaker: Breaker | None, times: int, now: float = 0.0) -> Breaker | None:
    for _ in range(times):
        breaker, _ = after_attempt(breaker, 0, False, now, RULES)
    return breaker


def opened_at(now: float) -> Breaker:
    breaker = failed(None, RULES.failures, now)
    assert breaker is not None
    assert breaker.open
    return breaker


def test_a_subscription_without_failures_sends() -> None:
    assert admission(None, 0.0) is Admission.SEND


def test_failures_below_the_threshold_keep_sending() -> None:
    breaker = failed(None, RULES.failures - 1)
    assert breaker is not None
    assert not breaker.open
    assert admission(breaker, 0.0) is Admission.SEND


def test_the_thresholds_failure_in_a_row_opens_it_and_holds_deliveries() -> None:
    breaker = opened_at(100.0)
    assert admission(breaker, 100.0) is Admission.HOLD


def test_a_success_before_the_threshold_starts_the_count_again() -> None:
    breaker = failed(None, RULES.failures - 1)
    breaker, closed = after_attempt(breaker, 0, True, 0.0, RULES)
    assert (breaker, closed) == (None, False)
    assert failed(breaker, RULES.failures - 1) == Breaker(RULES.failures - 1)


def test_the_first_probe_goes_after_the_first_wait() -> None:
    breaker = opened_at(100.0)
    assert admission(breaker, 100.0 + RULES.first_probe - 0.01) is Admission.HOLD
    assert admission(breaker, 100.0 + RULES.first_probe) is Admission.PROBE


def test_one_probe_at_a_time() -> None:
    breaker = probe_sent(opened_at(0.0), 7, 1.0, timeout=15.0)
    assert admission(breaker, 2.0) is Admission.HOLD


def test_a_probe_without_a_result_holds_the_others_only_until_its_timeout() -> None:
    breaker = probe_sent(opened_at(0.0), 7, 1.0, timeout=15.0)
    assert admission(breaker, 16.0) is Admission.PROBE


def test_a_successful_probe_closes_it() -> None:
    breaker = probe_sent(opened_at(0.0), 7, 1.0, timeout=15.0)
    assert after_attempt(breaker, 7, True, 1.2, RULES) == (None, True)


def test_a_failed_probe_doubles_the_wait_up_to_the_cap() -> None:
    breaker: Breaker = opened_at(0.0)
    now, waits = 0.0, []
    for n in range(6):
        now = breaker.probe_at
        breaker = probe_sent(breaker, n, now, timeout=15.0)
        after, closed = after_attempt(breaker, n, False, now, RULES)
        assert after is not None
        assert after.open
        assert not closed
        waits.append(after.probe_at - now)
        breaker = after
    assert waits == [2.0, 4.0, 8.0, 10.0, 10.0, 10.0]


def test_an_attempt_in_flight_when_it_opened_only_adds_to_the_count() -> None:
    breaker = probe_sent(opened_at(0.0), 7, 1.0, timeout=15.0)
    after, _ = after_attempt(breaker, 8, False, 1.5, RULES)
    assert after == Breaker(RULES.failures + 1, True, breaker.probe_at, 0, 7, breaker.probe_until)


def test_any_success_closes_an_open_breaker() -> None:
    breaker = probe_sent(opened_at(0.0), 7, 1.0, timeout=15.0)
    assert after_attempt(breaker, 8, True, 1.5, RULES) == (None, True)


# --- a worker's breakers ------------------------------------------------------------------


def broken(breakers: Breakers, subscription: uuid.UUID, now: float = 0.0) -> None:
    for _ in range(RULES.failures):
        breakers.record(make_job(subscription), False, now)


def test_record_says_when_a_breaker_opens_and_when_it_closes() -> None:
    breakers, sub = Breakers(RULES), uuid.uuid4()
    for _ in range(RULES.failures - 1):
        assert breakers.record(make_job(sub), False, 0.0) == (False, False)
    assert breakers.record(make_job(sub), False, 0.0) == (True, False)
    assert breakers.record(make_job(sub), False, 0.0) == (False, False)
    assert breakers.record(make_job(sub), True, 0.0) == (False, True)
    assert not breakers


def test_other_subscriptions_are_not_held() -> None:
    breakers, sub = Breakers(RULES), uuid.uuid4()
    broken(breakers, sub)
    assert breakers.admit(make_job(sub), 0.1) is Admission.HOLD
    assert breakers.admit(make_job(), 0.1) is Admission.SEND


def test_the_probe_is_the_first_delivery_admitted_once_due() -> None:
    breakers, sub = Breakers(RULES), uuid.uuid4()
    broken(breakers, sub)
    probe, other = make_job(sub), make_job(sub)
    assert breakers.admit(probe, RULES.first_probe) is Admission.PROBE
    assert breakers.admit(other, RULES.first_probe) is Admission.HOLD
    assert breakers.admit(other, RULES.first_probe + probe.timeout_seconds) is Admission.HOLD
    later = RULES.first_probe + probe.timeout_seconds + PROBE_MARGIN_SECONDS
    assert breakers.admit(other, later) is Admission.PROBE


def test_a_claim_leaves_out_held_subscriptions_and_takes_one_of_probing_ones() -> None:
    breakers, held, probing = Breakers(RULES), uuid.uuid4(), uuid.uuid4()
    broken(breakers, held, now=5.0)
    broken(breakers, probing, now=0.0)
    breakers.record(make_job(), False, 0.0)  # failing, not open: claimed as any other
    assert breakers.claim_view(RULES.first_probe) == ([held], [probing])


def test_the_jobs_queued_for_a_subscription_can_be_taken_out_to_be_held() -> None:
    scheduler = Scheduler(capacity=512, per_subscription=1, owner_floor=16)
    sub = uuid.uuid4()
    jobs: list[DeliveryJob] = [make_job(sub) for _ in range(3)]
    other = make_job()
    for job in (*jobs, other):
        scheduler.offer(job, 0.0)
    scheduler.offer(make_job(other.subscription_id), 0.0)
    assert scheduler.take_queue(sub) == jobs[1:]
    assert scheduler.queue_depths() == {other.subscription_id: 1}
    assert scheduler.waiting == 1
    assert scheduler.finish(jobs[0]) == (None, [])
