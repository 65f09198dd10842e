"""The portal's figures as pure decisions: buckets, success rates, chart series."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from webhook_hub.portal.charts import (
    HOUR,
    SETTLE_GRACE,
    HourStats,
    buckets,
    day_rows,
    hours_between,
    is_settled,
    latency_chart,
    latency_rows,
    outcome_chart,
    outcome_rows,
    success_rate,
    total_counts,
)
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


# -- the hourly rollup -----------------------------------------------------------------------


def test_hours_between_run_from_the_first_hour_to_the_current_one() -> None:
    hours = hours_between(NOW - timedelta(hours=2, minutes=5), NOW)
    assert hours == [datetime(2026, 11, 22, h, tzinfo=UTC) for h in (8, 9, 10)]


def test_an_hour_is_settled_once_over_and_its_grace_has_passed() -> None:
    hour = datetime(2026, 11, 22, 9, tzinfo=UTC)
    done = HourStats(succeeded=3, failed=1)
    assert is_settled(hour, done, hour + HOUR + SETTLE_GRACE)
    assert not is_settled(hour, done, hour + HOUR + SETTLE_GRACE - timedelta(seconds=1))


def test_an_hour_with_a_pending_delivery_is_not_settled() -> None:
    hour = datetime(2026, 11, 20, 9, tzinfo=UTC)
    assert not is_settled(hour, HourStats(succeeded=3, pending=1), NOW)


def test_day_rows_sum_the_hours_of_each_utc_day() -> None:
    hours = {
        datetime(2026, 11, 21, 23, tzinfo=UTC): HourStats(succeeded=2, failed=1),
        datetime(2026, 11, 22, 0, tzinfo=UTC): HourStats(succeeded=4, pending=1),
        datetime(2026, 11, 22, 9, tzinfo=UTC): HourStats(succeeded=1),
    }
    assert sorted(day_rows(hours)) == [
        (datetime(2026, 11, 21, tzinfo=UTC), "failed", 1),
        (datetime(2026, 11, 21, tzinfo=UTC), "succeeded", 2),
        (datetime(2026, 11, 22, tzinfo=UTC), "pending", 1),
        (datetime(2026, 11, 22, tzinfo=UTC), "succeeded", 5),
    ]


def test_outcome_rows_leave_out_zero_counts() -> None:
    hour = datetime(2026, 11, 22, 9, tzinfo=UTC)
    assert outcome_rows({hour: HourStats(failed=2)}) == [(hour, "failed", 2)]


def test_latency_rows_keep_each_hours_percentiles_and_skip_hours_without_attempts() -> None:
    tried, quiet = datetime(2026, 11, 22, 9, tzinfo=UTC), datetime(2026, 11, 22, 8, tzinfo=UTC)
    rows = latency_rows(
        {quiet: HourStats(succeeded=1), tried: HourStats(attempts=4, p50_ms=80.0, p95_ms=400.0)}
    )
    assert rows == [(tried, 80.0, 400.0)]


def test_total_counts_add_the_hours_up_by_status() -> None:
    totals = total_counts([HourStats(succeeded=2, failed=1), HourStats(succeeded=1, pending=3)])
    assert totals == {"succeeded": 3, "failed": 1, "pending": 3}
