"""The portal's figures as pure functions of aggregate rows: buckets filled (an hour without
deliveries is a zero, not a gap), success rates, and the `data-chart` JSON that servicekit's
`charts.js` draws (x: bucket starts in Unix seconds; series: label, tone, values)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
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


# A delivery's first row is written after its first attempt, with that attempt's start as its
# creation time: up to a timeout (30 s at most) and an outcome flush later. An hour is final
# only this long after its end; until then it may still gain deliveries.
SETTLE_GRACE = timedelta(minutes=10)
HOUR = STEP["hour"]


@dataclass(frozen=True)
class HourStats:
    """One endpoint's deliveries created in one hour: counted by status, and the p50/p95 of
    their attempts' durations (None without attempts)."""

    succeeded: int = 0
    failed: int = 0
    pending: int = 0
    attempts: int = 0
    p50_ms: float | None = None
    p95_ms: float | None = None

    def counts(self) -> dict[str, int]:
        return {"succeeded": self.succeeded, "failed": self.failed, "pending": self.pending}


def hours_between(first: datetime, now: datetime) -> list[datetime]:
    """The hour starts from `first`'s hour to the one `now` is in, oldest first."""
    start, last = truncate(first, "hour"), truncate(now, "hour")
    return [start + HOUR * n for n in range(int((last - start) / HOUR) + 1)]


def is_over(hour: datetime, now: datetime) -> bool:
    """Whether the hour and its grace have passed: it gains no more deliveries."""
    return hour + HOUR + SETTLE_GRACE <= now


def is_settled(hour: datetime, stats: HourStats, now: datetime) -> bool:
    """Whether an hour's figures are final, so the rollup may keep them: the hour is over and
    none of its deliveries is pending. Only a retry or a recover makes a settled delivery
    pending again, and those delete the hour's rollup row."""
    return stats.pending == 0 and is_over(hour, now)


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
