"""The delivery log's partitions by time, decided without the database (pure).

`deliveries` is partitioned by `log_time` (the time the log files a delivery under: its
event's own `time`, the same for every copy of the event, so the unique key (event,
subscription, log_time) still refuses a second delivery of one event), `delivery_attempts`
by `attempted_at`. Partitions are `width` wide, aligned on `EPOCH`, so every worker computes
the same bounds; the maintenance (maintenance.py) creates the current one and `AHEAD` more,
fills gaps back to the retention's edge, and drops whole partitions whose upper bound is past
`retention`. A partition not aligned to the width (the table the migration attached, ranges
made under another width) is kept as it is: new ones fill only what no partition covers.

There is no DEFAULT partition: it would have to be scanned (under an exclusive lock) each time
a partition is attached, refuse the attach of a range it holds rows of, and
`DETACH ... CONCURRENTLY` refuses to run beside one. Instead writers file a delivery whose
event time has no partition that is sure to exist (older than the retention, or further ahead
than the partitions made ahead: a producer's clock, a stream backlog) under the start of the
current partition (`log_time_of`), which always exists.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

# Bounds are multiples of the width from here (as the portal's `date_bin` origin).
EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
# How far the clocks of the processes writing a delivery and its attempts may disagree
# (`attempts_since`).
CLOCK_MARGIN = timedelta(hours=1)
# Partitions made after the current one: a maintenance round may come a width late and
# writers still find theirs.
AHEAD = 3
# Partitions created per round at most (the current and those ahead first): a gap of weeks
# at a width of a minute is filled over a few rounds instead of one long one.
MAX_CREATED_PER_ROUND = 200
SMALLEST_WIDTH = timedelta(minutes=1)
LARGEST_WIDTH = timedelta(days=366)

_WIDTH = re.compile(r"([0-9]{1,6})([mhd])")
_UNITS = {"m": timedelta(minutes=1), "h": timedelta(hours=1), "d": timedelta(days=1)}


def parse_width(text: object) -> timedelta:
    """A partition width written as `<n>m`, `<n>h` or `<n>d` ("1d", "6h", "15m"): a whole
    number of minutes from a minute to 366 days. ValueError for anything else."""
    if isinstance(text, timedelta):
        width = text
    elif isinstance(text, str) and (found := _WIDTH.fullmatch(text.strip().lower())):
        width = int(found.group(1)) * _UNITS[found.group(2)]
    else:
        raise ValueError(f"a partition width is written like 1d, 6h or 15m, not {text!r}")
    if not SMALLEST_WIDTH <= width <= LARGEST_WIDTH or width % SMALLEST_WIDTH:
        raise ValueError("a partition width is a whole number of minutes, 1m to 366d")
    return width


def format_width(width: timedelta) -> str:
    """The shortest `parse_width` text of `width`."""
    for unit in ("d", "h", "m"):
        count, rest = divmod(width, _UNITS[unit])
        if not rest:
            return f"{count}{unit}"
    raise ValueError(f"not a whole number of minutes: {width}")


@dataclass(frozen=True)
class Layout:
    """How one table is partitioned: `width` wide partitions, dropped once every row they
    can hold is older than `retention`."""

    width: timedelta
    retention: timedelta

    def slot_of(self, moment: datetime) -> datetime:
        """The lower bound of the aligned partition that holds `moment`."""
        return EPOCH + ((moment - EPOCH) // self.width) * self.width

    def expired(self, upper: datetime, now: datetime) -> bool:
        """Whether every row a partition up to `upper` (exclusive) can hold is past the
        retention."""
        return upper <= now - self.retention

    def log_time_of(self, event_time: datetime, now: datetime) -> datetime:
        """The partition key of a delivery of an event of `event_time`, written at `now`:
        the event's time when a partition surely holds it until its retention (the copies
        of one event then share the key), else the start of the current partition."""
        return self.filing(now)(event_time)

    def filing(self, now: datetime) -> Callable[[datetime], datetime]:
        """`log_time_of` at `now`, its bounds computed once (for a batch of rows)."""
        # Not dropped for at least a width more, and made ahead with a width to spare.
        earliest = self.slot_of(now - self.retention + self.width)
        current = self.slot_of(now)
        latest = current + AHEAD * self.width

        def log_time(event_time: datetime) -> datetime:
            if event_time.tzinfo is None:  # a producer's time without offset is UTC
                event_time = event_time.replace(tzinfo=UTC)
            return event_time if earliest <= event_time < latest else current

        return log_time


def attempts_since(created_at: datetime) -> datetime:
    """A lower bound of the `attempted_at` of every attempt of a delivery created at
    `created_at`, for reads of its attempts to name: `delivery_id` alone says nothing of
    their partitions, and a lookup by it probes every partition's index (30 at the default
    width and retention). An attempt is made after its delivery is created; the margin is for
    the clocks of the processes that wrote each."""
    return created_at - CLOCK_MARGIN


@dataclass(frozen=True)
class Partition:
    """An attached partition: `lower` None for MINVALUE, `upper` None for MAXVALUE."""

    name: str
    lower: datetime | None
    upper: datetime | None


@dataclass(frozen=True)
class Plan:
    """What a maintenance round does to one table: partitions to create (name, lower,
    upper), in order, and the names of those to drop."""

    create: list[tuple[str, datetime, datetime]]
    drop: list[str]


def partition_name(table: str, lower: datetime) -> str:
    """`<table>_p<yyyymmdd>_<hhmm>` of its lower bound in UTC: bounds are whole minutes, and
    no two partitions of a table share a lower bound."""
    return f"{table}_p{lower.astimezone(UTC):%Y%m%d_%H%M}"


def plan(table: str, existing: Sequence[Partition], now: datetime, layout: Layout) -> Plan:
    """The partitions to drop (expired ones) and to create: every aligned slot from the one
    that holds `now - retention` to `AHEAD` after the current one, less what the partitions
    that stay already cover (so a slot partly covered gets a partition of its uncovered
    part). The current slot and those ahead come first, then the gaps behind, newest first;
    at most `MAX_CREATED_PER_ROUND`."""
    drop = [p.name for p in existing if p.upper is not None and layout.expired(p.upper, now)]
    kept = sorted(
        (p for p in existing if p.name not in drop),
        key=lambda p: p.lower or datetime.min.replace(tzinfo=UTC),
    )
    current = layout.slot_of(now)
    first = layout.slot_of(now - layout.retention)
    slots = [current + n * layout.width for n in range(AHEAD + 1)]
    behind = current - layout.width
    while behind >= first and len(slots) < MAX_CREATED_PER_ROUND * 2:
        slots.append(behind)
        behind -= layout.width
    create: list[tuple[str, datetime, datetime]] = []
    for lower in slots:
        for start, end in _uncovered(lower, lower + layout.width, kept):
            if layout.expired(end, now):
                continue
            create.append((partition_name(table, start), start, end))
    return Plan(create[:MAX_CREATED_PER_ROUND], drop)


def _uncovered(
    lower: datetime, upper: datetime, partitions: Sequence[Partition]
) -> list[tuple[datetime, datetime]]:
    """The parts of [lower, upper) no partition covers (`partitions` sorted by lower)."""
    gaps: list[tuple[datetime, datetime]] = []
    cursor = lower
    for p in partitions:
        p_lower = p.lower or datetime.min.replace(tzinfo=UTC)
        p_upper = p.upper or datetime.max.replace(tzinfo=UTC)
        if p_upper <= cursor or p_lower >= upper:
            continue
        if p_lower > cursor:
            gaps.append((cursor, p_lower))
        cursor = max(cursor, p_upper)
        if cursor >= upper:
            return gaps
    if cursor < upper:
        gaps.append((cursor, upper))
    return gaps


# `pg_get_expr(relpartbound, oid)` of a range partition over one timestamptz column, read
# with the session's TimeZone at UTC: FOR VALUES FROM ('2024-01-01 00:00:00+00') TO (MAXVALUE)
_BOUND = r"(MINVALUE|MAXVALUE|'[^']*')"
_RANGE = re.compile(rf"FOR VALUES FROM \({_BOUND}\) TO \({_BOUND}\)")


def parse_bounds(expression: str) -> tuple[datetime | None, datetime | None] | None:
    """A range partition's (lower, upper) from its bound expression; None for anything else
    (DEFAULT, a list, a bound that is no timestamp)."""
    found = _RANGE.fullmatch(expression.strip())
    if found is None:
        return None
    try:
        return _bound(found.group(1)), _bound(found.group(2))
    except ValueError:
        return None


def _bound(text: str) -> datetime | None:
    if text in ("MINVALUE", "MAXVALUE"):
        return None
    moment = datetime.fromisoformat(text.strip("'"))
    if moment.tzinfo is None:
        raise ValueError("a bound without offset")
    return moment


def bound_literal(moment: datetime) -> str:
    """A bound as a SQL literal (our own datetimes only: nothing from outside)."""
    return f"'{moment.astimezone(UTC).isoformat()}'"
