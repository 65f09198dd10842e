"""The portal's figures as pure decisions: buckets, success rates, chart series."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from webhook_hub.portal.charts import buckets, latency_chart, outcome_chart, success_rate
from webhook_hub.portal.forms import local_time_value, parse_local_time

NOW = datetime(2026, 11, 22, 10, 42, 7, tzinfo=UTC)


def test_hour_buckets_end_with_the_current_hour_oldest_first() -> None:
    hours = buckets(NOW, "hour", 24)
    assert len(hours) == 24
    assert hours[-1] == datetime(2026, 11, 22, 10, tzinfo=UTC)
    assert hours[0] == datetime(2026, 11, 21, 11, tzinfo=UTC)


def test_day_buckets_are_utc_midnights() -> None:
    days = buckets(NOW, "day", 7)
    assert days[0] == datetime(2026, 11, 16, tzinfo=UTC)
    assert days[-1] == datetime(2026, 11, 22, tzinfo=UTC)


def test_success_rate_counts_only_finished_deliveries() -> None:
    assert success_rate({"succeeded": 3, "failed": 1, "pending": 10}) == 0.75


def test_success_rate_is_unknown_without_a_finished_delivery() -> None:
    assert success_rate({"pending": 2}) is None


def test_an_outcome_chart_fills_empty_buckets_with_zero() -> None:
    hours = buckets(NOW, "hour", 3)
    chart = outcome_chart([(hours[2], "failed", 4), (hours[0], "succeeded", 1)], hours, "t")
    values = {s["label"]: s["values"] for s in chart["series"]}
    assert values == {"succeeded": [1, 0, 0], "failed": [0, 0, 4], "pending": [0, 0, 0]}
    assert chart["x"] == [int(h.timestamp()) for h in hours]
    assert chart["kind"] == "bars"
    assert chart["stacked"] is True


def test_an_outcome_chart_ignores_rows_outside_its_buckets() -> None:
    hours = buckets(NOW, "hour", 2)
    chart = outcome_chart([(hours[0] - timedelta(hours=5), "succeeded", 9)], hours, "t")
    assert sum(chart["series"][0]["values"]) == 0


def test_a_latency_chart_leaves_hours_without_attempts_as_gaps() -> None:
    hours = buckets(NOW, "hour", 2)
    chart = latency_chart([(hours[1], 120.04, 480.0)], hours, "t")
    assert chart["series"][0]["values"] == [None, 120.0]
    assert chart["series"][1]["values"] == [None, 480.0]
    assert chart["kind"] == "line"


def test_a_datetime_local_value_is_read_as_utc() -> None:
    assert parse_local_time("2026-11-22T10:00") == datetime(2026, 11, 22, 10, tzinfo=UTC)
    assert local_time_value(datetime(2026, 11, 22, 10, tzinfo=UTC)) == "2026-11-22T10:00"


def test_a_value_that_is_not_a_date_is_no_moment() -> None:
    assert parse_local_time("yesterday") is None
