"""What an attempt's answer means, the delivery's next step, and the auto-disable decision:
pure functions (no database)."""

from __future__ import annotations

import random
import uuid
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from webhook_hub.delivery_engine.decisions import (
    Outcome,
    RetryRules,
    attempt_that_raised,
    decided,
    next_step,
    outcome_of,
    tally,
)
from webhook_hub.delivery_engine.disabling import disable_reason
from webhook_hub.delivery_engine.jobs import Failure
from webhook_hub.models import DeliveryStatus

from tests.job_factories import WHEN, make_job, make_result

RULES = RetryRules(schedule=[5.0, 300.0], jitter=0.0, retry_after_cap=3600.0)


@pytest.mark.parametrize(
    ("status", "failure", "outcome"),
    [
        (200, None, Outcome.DELIVERED),
        (204, None, Outcome.DELIVERED),
        (299, None, Outcome.DELIVERED),
        (410, None, Outcome.GONE),
        (429, None, Outcome.THROTTLED),
        (503, None, Outcome.THROTTLED),
        (500, None, Outcome.REJECTED),
        (302, None, Outcome.REJECTED),
        (None, Failure.TIMEOUT, Outcome.TIMED_OUT),
        (None, Failure.REFUSED, Outcome.REFUSED),
        (None, Failure.NETWORK, Outcome.UNREACHABLE),
        (None, None, Outcome.UNREACHABLE),
    ],
)
def test_each_answer_has_one_outcome(
    status: int | None, failure: Failure | None, outcome: Outcome
) -> None:
    assert outcome_of(status, failure) is outcome


@pytest.mark.parametrize(
    ("status", "failure"),
    [(200, None), (410, None), (503, None), (500, None), (None, Failure.TIMEOUT), (None, None)],
)
def test_a_result_carries_the_outcome_of_its_answer(
    status: int | None, failure: Failure | None
) -> None:
    assert make_result(status=status, failure=failure).outcome is outcome_of(status, failure)


def test_an_attempt_that_raised_carries_the_outcome_unreachable() -> None:
    result = attempt_that_raised(make_job(), WHEN, RuntimeError("boom"))
    assert result.outcome is Outcome.UNREACHABLE


def test_the_next_step_is_decided_once_and_carried_by_the_result() -> None:
    rules = RetryRules(schedule=[100.0], jitter=0.5, retry_after_cap=3600.0)
    result = make_result(status=500)
    step = decided(result, rules)
    assert result.step is step
    assert decided(result, rules) is step  # the same jittered time, not a second draw


def test_a_2xx_completes_the_delivery() -> None:
    step = next_step(make_result(status=200), RULES)
    assert (step.status, step.next_attempt_at, step.completed_at) == (
        DeliveryStatus.SUCCEEDED,
        None,
        WHEN,
    )


def test_410_gone_fails_the_delivery_at_once_whatever_the_schedule_left() -> None:
    step = next_step(make_result(status=410), RULES)
    assert (step.status, step.next_attempt_at) == (DeliveryStatus.FAILED, None)


def test_an_error_status_is_retried_after_the_schedules_delay() -> None:
    step = next_step(make_result(status=500), RULES)
    assert step.status is DeliveryStatus.PENDING
    assert step.next_attempt_at == WHEN + timedelta(seconds=5)


@pytest.mark.parametrize("status", [429, 503])
def test_retry_after_of_429_and_503_lengthens_the_wait(status: int) -> None:
    step = next_step(make_result(status=status, retry_after="120"), RULES)
    assert step.next_attempt_at == WHEN + timedelta(seconds=120)


def test_retry_after_of_another_status_is_ignored() -> None:
    step = next_step(make_result(status=500, retry_after="120"), RULES)
    assert step.next_attempt_at == WHEN + timedelta(seconds=5)


def test_retry_after_is_capped_by_the_rules() -> None:
    step = next_step(make_result(status=429, retry_after="999999"), RULES)
    assert step.next_attempt_at == WHEN + timedelta(seconds=3600)


def test_a_timeout_is_retried_like_any_failure() -> None:
    step = next_step(make_result(status=None, failure=Failure.TIMEOUT), RULES)
    assert step.next_attempt_at == WHEN + timedelta(seconds=5)


def test_the_second_retry_follows_the_schedules_second_delay() -> None:
    step = next_step(make_result(make_job(attempts=1), status=500), RULES)
    assert step.next_attempt_at == WHEN + timedelta(seconds=300)


def test_once_the_schedule_is_spent_the_delivery_fails_for_good() -> None:
    step = next_step(make_result(make_job(attempts=2), status=500), RULES)
    assert (step.status, step.completed_at) == (DeliveryStatus.FAILED, WHEN)


def test_jitter_spreads_the_retry_within_its_bounds() -> None:
    rules = RetryRules(schedule=[100.0], jitter=0.2, retry_after_cap=3600.0)
    step = next_step(make_result(status=500), rules, rng=random.Random(1))
    assert step.next_attempt_at is not None
    assert 80 <= (step.next_attempt_at - WHEN).total_seconds() <= 120


@pytest.mark.parametrize(
    "retry_after",
    ["Wed, 21 Oct 2015 07:28:00 -0000", "\u00b2", "9" * 400, "Fri, 31 Dec 99999 23:59:59 GMT"],
)
@pytest.mark.parametrize("status", [429, 503])
def test_a_hostile_retry_after_never_stops_the_decision(status: int, retry_after: str) -> None:
    step = next_step(make_result(status=status, retry_after=retry_after), RULES)
    assert step.status is DeliveryStatus.PENDING
    assert step.next_attempt_at is not None
    assert WHEN + timedelta(seconds=5) <= step.next_attempt_at <= WHEN + timedelta(seconds=3600)


@settings(max_examples=1000, deadline=None)
@given(
    status=st.one_of(st.none(), st.integers(min_value=0, max_value=999)),
    failure=st.one_of(st.none(), st.sampled_from(Failure)),
    retry_after=st.one_of(st.none(), st.text()),
    attempts=st.integers(min_value=0, max_value=10),
)
def test_every_answer_has_a_next_step_within_the_rules(
    status: int | None, failure: Failure | None, retry_after: str | None, attempts: int
) -> None:
    result = make_result(
        make_job(attempts=attempts), status=status, failure=failure, retry_after=retry_after
    )
    step = next_step(result, RULES)
    if step.status is DeliveryStatus.PENDING:
        assert step.next_attempt_at is not None
        assert WHEN < step.next_attempt_at <= WHEN + timedelta(seconds=3600)
    else:
        assert (step.next_attempt_at, step.completed_at) == (None, WHEN)


def test_a_tally_counts_the_failures_after_the_last_success() -> None:
    sub = uuid.uuid4()
    results = [
        make_result(make_job(sub), status=500),
        make_result(make_job(sub), status=200, at=WHEN + timedelta(seconds=1)),
        make_result(make_job(sub), status=500, at=WHEN + timedelta(seconds=2)),
        make_result(make_job(sub), status=None, failure=Failure.TIMEOUT),
    ]
    entry = tally(results)[sub]
    assert (entry.reset, entry.failures, entry.last_success, entry.gone) == (
        True,
        2,
        WHEN + timedelta(seconds=1),
        False,
    )


def test_a_tally_without_success_adds_to_the_stored_count() -> None:
    sub = uuid.uuid4()
    entry = tally([make_result(make_job(sub), status=500)])[sub]
    assert (entry.reset, entry.failures) == (False, 1)


def test_a_tally_remembers_a_410() -> None:
    sub = uuid.uuid4()
    results = [make_result(make_job(sub), status=410), make_result(make_job(sub), status=200)]
    assert tally(results)[sub].gone


def test_a_subscription_is_disabled_at_the_failure_threshold() -> None:
    assert disable_reason(gone=False, failure_count=100, threshold=100) == (
        "100 consecutive failed deliveries"
    )


def test_a_subscription_below_the_threshold_stays_active() -> None:
    assert disable_reason(gone=False, failure_count=99, threshold=100) is None


def test_410_gone_disables_at_once() -> None:
    assert disable_reason(gone=True, failure_count=1, threshold=100) == (
        "the endpoint answered 410 Gone"
    )
