"""`BatchHistogram`: values added a batch at a time, exposed as prometheus_client's own
`Histogram` exposes the same values (so an upgrade that changes the format shows here)."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, Histogram, generate_latest
from servicekit.histograms import BatchHistogram

BUCKETS = (0.005, 0.01, 0.25, 1, 30)
VALUES = [0.001, 0.005, 0.0051, 0.2, 0.25, 1.0, 7.5, 31.0, 0.0]


def exposition(registry: CollectorRegistry) -> list[str]:
    """The text exposition's sample lines, without `_created` (a batch histogram has none)."""
    lines = generate_latest(registry).decode().splitlines()
    return sorted(line for line in lines if not line.startswith("#") and "_created" not in line)


def test_a_batch_is_exposed_as_prometheus_clients_histogram_exposes_the_same_values() -> None:
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    batch = BatchHistogram("lag_seconds", "Lag", ["outcome"], buckets=BUCKETS, registry=ours)
    reference = Histogram("lag_seconds", "Lag", ["outcome"], buckets=BUCKETS, registry=theirs)
    batch.observe_many(VALUES[:4], "delivered")
    batch.observe_many(VALUES[4:], "delivered")
    batch.observe_many([2.0], "gone")
    for value in VALUES:
        reference.labels("delivered").observe(value)
    reference.labels("gone").observe(2.0)
    assert exposition(ours) == exposition(theirs)


def test_a_value_on_a_bound_counts_in_that_bounds_bucket() -> None:
    registry = CollectorRegistry()
    histogram = BatchHistogram("wait_seconds", "Wait", buckets=(1, 2), registry=registry)
    histogram.observe_many([1.0, 2.0, 2.5])
    assert registry.get_sample_value("wait_seconds_bucket", {"le": "1.0"}) == 1
    assert registry.get_sample_value("wait_seconds_bucket", {"le": "2.0"}) == 2
    assert registry.get_sample_value("wait_seconds_bucket", {"le": "+Inf"}) == 3
    assert registry.get_sample_value("wait_seconds_count") == 3
    assert registry.get_sample_value("wait_seconds_sum") == 5.5


def test_a_touched_series_is_exposed_at_zero_before_any_value() -> None:
    registry = CollectorRegistry()
    histogram = BatchHistogram("idle_seconds", "Idle", ["kind"], buckets=(1,), registry=registry)
    assert registry.get_sample_value("idle_seconds_count", {"kind": "none"}) is None
    histogram.touch("none")
    assert registry.get_sample_value("idle_seconds_count", {"kind": "none"}) == 0
    assert registry.get_sample_value("idle_seconds_bucket", {"kind": "none", "le": "+Inf"}) == 0


def test_a_histogram_without_labels_is_exposed_from_the_start() -> None:
    registry = CollectorRegistry()
    BatchHistogram("lag_seconds", "Lag", buckets=(1,), registry=registry)
    assert registry.get_sample_value("lag_seconds_count") == 0
    assert registry.get_sample_value("lag_seconds_sum") == 0


def test_label_values_are_exposed_as_text() -> None:
    registry = CollectorRegistry()
    histogram = BatchHistogram("coded_seconds", "Coded", ["code"], buckets=(1,), registry=registry)
    histogram.observe_many([0.5], 200)  # type: ignore[arg-type]
    assert registry.get_sample_value("coded_seconds_count", {"code": "200"}) == 1


def test_label_values_must_match_the_label_names() -> None:
    registry = CollectorRegistry()
    histogram = BatchHistogram(
        "typed_seconds", "Typed", ["a", "b"], buckets=(1,), registry=registry
    )
    with pytest.raises(ValueError, match="takes the labels"):
        histogram.observe_many([0.5], "only-one")
    assert registry.get_sample_value("typed_seconds_count", {"a": "x", "b": "y"}) is None


def test_a_name_is_registered_once() -> None:
    registry = CollectorRegistry()
    BatchHistogram("twice_seconds", "Twice", buckets=(1,), registry=registry)
    with pytest.raises(ValueError, match="Duplicated"):
        BatchHistogram("twice_seconds", "Twice", buckets=(1,), registry=registry)
