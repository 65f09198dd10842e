"""An endpoint's deliveries per hour, as the delivery log's rollups keep them: the hours'
buckets, when an hour is over and when its figures are final (pure functions of the clock).
The portal's charts draw them (portal/charts.py)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

Unit = Literal["hour", "day"]
STEP: dict[Unit, timedelta] = {"hour": timedelta(hours=1), "day": timedelta(days=1)}


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
