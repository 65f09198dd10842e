"""The worker's metrics for operators: attempt duration by outcome, publication-to-2xx lag,
and per-subscription queue depth with a bounded label set (no database)."""

from __future__ import annotations

import uuid
from datetime import timedelta

from prometheus_client import REGISTRY
from webhook_hub.delivery_engine.decisions import Outcome
from webhook_hub.delivery_engine.engine import observe, show_queue_depths
from webhook_hub.delivery_engine.jobs import Failure

from tests.job_factories import WHEN, make_job, make_result


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_each_attempt_is_timed_under_its_outcome() -> None:
    before = {
        outcome: sample("webhook_delivery_attempt_seconds_count", outcome=outcome)
        for outcome in ("delivered", "timed_out", "throttled")
    }
    observe(
        [
            make_result(status=204),
            make_result(status=None, failure=Failure.TIMEOUT),
            make_result(status=429),
        ]
    )
    for outcome, count in before.items():
        assert sample("webhook_delivery_attempt_seconds_count", outcome=outcome) == count + 1


def test_the_attempt_counter_keeps_its_succeeded_and_failed_labels() -> None:
    succeeded = sample("webhook_delivery_attempts_total", outcome="succeeded")
    failed = sample("webhook_delivery_attempts_total", outcome="failed")
    observe([make_result(status=200), make_result(status=500), make_result(status=410)])
    assert sample("webhook_delivery_attempts_total", outcome="succeeded") == succeeded + 1
    assert sample("webhook_delivery_attempts_total", outcome="failed") == failed + 2


def test_lag_runs_from_publication_to_the_receivers_2xx_only() -> None:
    count = sample("webhook_delivery_lag_seconds_count")
    total = sample("webhook_delivery_lag_seconds_sum")
    job = make_job()  # published at WHEN
    late = WHEN + timedelta(seconds=2)
    observe([make_result(job, status=200, at=late), make_result(status=500, at=late)])
    assert sample("webhook_delivery_lag_seconds_count") == count + 1
    # Attempted 2 s after publication, answered 5 ms later.
    assert abs(sample("webhook_delivery_lag_seconds_sum") - total - 2.005) < 1e-6


def test_queue_depth_has_a_series_only_while_a_subscription_has_queued_work() -> None:
    busy, drained = uuid.uuid4(), uuid.uuid4()
    shown = show_queue_depths({busy: 3, drained: 1}, set())
    assert sample("webhook_delivery_queue_depth", subscription=str(busy)) == 3
    shown = show_queue_depths({busy: 2}, shown)
    assert shown == {str(busy)}
    assert sample("webhook_delivery_queue_depth", subscription=str(busy)) == 2
    assert (
        REGISTRY.get_sample_value("webhook_delivery_queue_depth", {"subscription": str(drained)})
        is None
    )
    show_queue_depths({}, shown)
    assert (
        REGISTRY.get_sample_value("webhook_delivery_queue_depth", {"subscription": str(busy)})
        is None
    )


def test_every_outcomes_duration_series_is_exposed_before_any_attempt() -> None:
    for outcome in Outcome:
        labels = {"outcome": outcome.value}
        assert (
            REGISTRY.get_sample_value("webhook_delivery_attempt_seconds_count", labels) is not None
        )
