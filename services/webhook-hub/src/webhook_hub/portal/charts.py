"""The portal's figures as pure functions of aggregate rows: buckets filled (an hour without
deliveries is a zero, not a gap), success rates, and the `data-chart` JSON that servicekit's
`charts.js` draws (x: bucket starts in Unix seconds; series: label, tone, values)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

Unit = Literal["hour", "day"]
STEP: dict[Unit, timedelta] = {"hour": timedelta(hours=1), "day": timedelta(days=1)}
# Outcomes in stacking order, bottom first, with the kit's colour tone of each.
OUTCOMES = (("succeeded", "ok"), ("failed", "bad"), ("pending", "info"))


def truncate(moment: datetime, unit: Unit) -> datetime:
    moment = moment.astimezone(UTC)
    if unit == "day":
        return moment.replace(hour=0, minute=0, second=0, microsecond=0)
    return moment.replace(minute=0, second=0, microsecond=0)


def buckets(now: datetime, unit: Unit, count: int) -> list[datetime]:
    """The `count` bucket starts ending with the one `now` is in, oldest first."""
    last = truncate(now, unit)
    return [last - STEP[unit] * back for back in range(count - 1, -1, -1)]


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
