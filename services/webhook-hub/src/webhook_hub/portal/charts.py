"""The portal's figures as pure functions of aggregate rows: buckets filled (an hour without
deliveries is a zero, not a gap), success rates, and the `data-chart` JSON that servicekit's
`charts.js` draws (x: bucket starts in Unix seconds; series: label, tone, values)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from webhook_hub.deliveries.hour_stats import HOUR as HOUR
from webhook_hub.deliveries.hour_stats import SETTLE_GRACE as SETTLE_GRACE
from webhook_hub.deliveries.hour_stats import STEP as STEP
from webhook_hub.deliveries.hour_stats import HourStats as HourStats
from webhook_hub.deliveries.hour_stats import Unit as Unit
from webhook_hub.deliveries.hour_stats import buckets as buckets
from webhook_hub.deliveries.hour_stats import hours_between as hours_between
from webhook_hub.deliveries.hour_stats import is_over as is_over
from webhook_hub.deliveries.hour_stats import is_settled as is_settled
from webhook_hub.deliveries.hour_stats import truncate as truncate

# Outcomes in stacking order, bottom first, with the kit's colour tone of each.
OUTCOMES = (("succeeded", "ok"), ("failed", "bad"), ("pending", "info"))


def outcome_rows(hours: Mapping[datetime, HourStats]) -> list[tuple[datetime, str, int]]:
    """(hour, status, count) rows of an endpoint's hours, for `outcome_chart`."""
    return [
        (hour, status, count)
        for hour, stats in hours.items()
        for status, count in stats.counts().items()
        if count
    ]


def day_rows(hours: Mapping[datetime, HourStats]) -> list[tuple[datetime, str, int]]:
    """Hour counts summed into UTC days (counts add up; percentiles do not, so the latency
    chart stays per hour)."""
    totals: dict[tuple[datetime, str], int] = {}
    for hour, status, count in outcome_rows(hours):
        key = (truncate(hour, "day"), status)
        totals[key] = totals.get(key, 0) + count
    return [(day, status, count) for (day, status), count in totals.items()]


def latency_rows(hours: Mapping[datetime, HourStats]) -> list[tuple[datetime, float, float]]:
    """(hour, p50, p95) of the hours whose deliveries were attempted, for `latency_chart`."""
    return [
        (hour, stats.p50_ms, stats.p95_ms)
        for hour, stats in hours.items()
        if stats.p50_ms is not None and stats.p95_ms is not None
    ]


def total_counts(hours: Iterable[HourStats]) -> dict[str, int]:
    """The deliveries of several hours counted by status (an endpoint's 24 h, for its rate)."""
    totals: dict[str, int] = {}
    for stats in hours:
        for status, count in stats.counts().items():
            totals[status] = totals.get(status, 0) + count
    return totals


def success_rate(counts: dict[str, int]) -> float | None:
    """Succeeded among the finished deliveries (pending ones have no outcome yet); None when
    nothing finished, which a page shows as "no deliveries" rather than 0 %."""
    succeeded, failed = counts.get("succeeded", 0), counts.get("failed", 0)
    finished = succeeded + failed
    return None if finished == 0 else succeeded / finished


def _epoch(moment: datetime) -> int:
    return int(moment.astimezone(UTC).timestamp())


def outcome_chart(
    rows: Iterable[tuple[datetime, str, int]], starts: list[datetime], title: str
) -> dict[str, Any]:
    """Stacked bars of deliveries per bucket, one series per outcome."""
    index = {_epoch(start): i for i, start in enumerate(starts)}
    values = {status: [0] * len(starts) for status, _ in OUTCOMES}
    for bucket, status, count in rows:
        position = index.get(_epoch(bucket))
        if position is not None and status in values:
            values[status][position] += count
    return {
        "title": title,
        "kind": "bars",
        "stacked": True,
        "unit": "deliveries",
        "x": [_epoch(start) for start in starts],
        "series": [
            {"label": status, "tone": tone, "values": values[status]} for status, tone in OUTCOMES
        ],
    }


def latency_chart(
    rows: Iterable[tuple[datetime, float, float]], starts: list[datetime], title: str
) -> dict[str, Any]:
    """Lines of the attempt duration's p50 and p95 per bucket; null where nothing was tried."""
    index = {_epoch(start): i for i, start in enumerate(starts)}
    p50: list[float | None] = [None] * len(starts)
    p95: list[float | None] = [None] * len(starts)
    for bucket, median, high in rows:
        position = index.get(_epoch(bucket))
        if position is not None:
            p50[position], p95[position] = round(median, 1), round(high, 1)
    return {
        "title": title,
        "kind": "line",
        "stacked": False,
        "unit": "ms",
        "x": [_epoch(start) for start in starts],
        "series": [
            {"label": "p50", "tone": "accent", "values": p50},
            {"label": "p95", "tone": "warn", "values": p95},
        ],
    }


def chart_total(chart: dict[str, Any]) -> int:
    """Everything a bar chart counts: its summary for screen readers says it."""
    return sum(sum(v for v in series["values"] if v) for series in chart["series"])
