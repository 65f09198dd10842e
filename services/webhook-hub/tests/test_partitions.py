"""The delivery log's partition decisions (partitions.py), pure."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError
from webhook_hub.partitions import (
    AHEAD,
    EPOCH,
    Layout,
    Partition,
    parse_bounds,
    parse_width,
    partition_name,
    plan,
)
from webhook_hub.settings import Settings

NOW = datetime(2026, 11, 23, 12, 34, 56, tzinfo=UTC)
DAY = Layout(timedelta(days=1), timedelta(days=30))
MINUTE = Layout(timedelta(minutes=1), timedelta(minutes=5))


@pytest.mark.parametrize(
    ("text", "width"),
    [
        ("1d", timedelta(days=1)),
        ("1h", timedelta(hours=1)),
        ("1m", timedelta(minutes=1)),
        (" 15M ", timedelta(minutes=15)),
        ("6h", timedelta(hours=6)),
        ("366d", timedelta(days=366)),
    ],
)
def test_a_width_is_a_whole_number_of_minutes_hours_or_days(text: str, width: timedelta) -> None:
    assert parse_width(text) == width


@pytest.mark.parametrize(
    "text", ["", "d", "0m", "1s", "1.5h", "-1d", "1w", "367d", "1d1h", "\uff11d", None, 5, b"1d"]
)
def test_any_other_width_is_refused(text: object) -> None:
    with pytest.raises(ValueError, match="partition width"):
        parse_width(text)


def test_a_width_the_settings_cannot_read_is_a_settings_error() -> None:
    with pytest.raises(ValidationError, match="delivery_partition_width"):
        Settings(delivery_partition_width="a day")


def test_slots_are_aligned_on_the_epoch_whatever_moment_falls_in_them() -> None:
    hour = Layout(timedelta(hours=1), timedelta(days=1))
    start = datetime(2026, 11, 23, 12, tzinfo=UTC)
    for moment in (start, start + timedelta(minutes=59, seconds=59), start + timedelta(hours=1)):
        slot = hour.slot_of(moment)
        assert (slot - EPOCH) % hour.width == timedelta(0)
        assert slot <= moment < slot + hour.width
    assert hour.slot_of(start + timedelta(minutes=30)) == start


def test_an_empty_log_gets_the_current_partition_and_those_ahead_first() -> None:
    decided = plan("deliveries", [], NOW, DAY)
    current = datetime(2026, 11, 23, tzinfo=UTC)
    assert decided.create[: AHEAD + 1] == [
        (partition_name("deliveries", lower), lower, lower + DAY.width)
        for lower in (current + n * DAY.width for n in range(AHEAD + 1))
    ]
    assert decided.drop == []


def test_partitions_behind_are_filled_back_to_the_retentions_edge_only() -> None:
    decided = plan("deliveries", [], NOW, DAY)
    lowers = sorted(lower for _, lower, _ in decided.create)
    assert lowers[0] == DAY.slot_of(NOW - DAY.retention)
    assert len(lowers) == 30 + 1 + AHEAD


def test_a_log_with_its_partitions_made_asks_for_nothing() -> None:
    existing = [
        Partition(name, lower, upper) for name, lower, upper in plan("d", [], NOW, DAY).create
    ]
    assert plan("d", existing, NOW + timedelta(hours=1), DAY).create == []


def test_partitions_wholly_past_the_retention_are_dropped_and_the_one_straddling_it_kept() -> None:
    edge = NOW - DAY.retention
    old = Partition("old", edge - timedelta(days=1), edge)
    straddling = Partition("straddling", edge, edge + timedelta(days=1))
    legacy = Partition("legacy", None, edge - timedelta(days=3))
    decided = plan("d", [legacy, old, straddling], NOW, DAY)
    assert sorted(decided.drop) == ["legacy", "old"]


def test_only_the_part_of_a_slot_no_partition_covers_is_created() -> None:
    # The migration's partition ends on a minute, not on the width.
    end = datetime(2026, 11, 23, 9, 17, tzinfo=UTC)
    legacy = Partition("deliveries_legacy", None, end)
    decided = plan("deliveries", [legacy], NOW, DAY)
    first = min(decided.create, key=lambda created: created[1])
    assert first == (
        "deliveries_p20261123_0917",
        end,
        datetime(2026, 11, 24, tzinfo=UTC),
    )


def test_a_narrower_width_fills_around_wider_partitions_without_overlap() -> None:
    daily = [Partition(n, lo, hi) for n, lo, hi in plan("d", [], NOW, DAY).create]
    hourly = Layout(timedelta(hours=1), DAY.retention)
    later = NOW + timedelta(days=3, hours=5)
    made = plan("d", daily, later, hourly).create
    everything = sorted(
        [(p.lower, p.upper) for p in daily] + [(lo, hi) for _, lo, hi in made],
        key=lambda bounds: bounds[0] or EPOCH,
    )
    for (_, upper), (lower, _) in itertools.pairwise(everything):
        assert upper is not None
        assert lower is not None
        assert upper <= lower


def test_rounds_on_a_moving_clock_keep_every_accepted_time_covered_and_nothing_overlapping() -> (
    None
):
    existing: list[Partition] = [Partition("legacy", None, NOW.replace(second=0))]
    clock = NOW
    for _ in range(40):  # a round every quarter width, over ten minutes at a minute's width
        decided = plan("d", existing, clock, MINUTE)
        existing = [p for p in existing if p.name not in decided.drop]
        existing += [Partition(n, lo, hi) for n, lo, hi in decided.create]
        ranges = sorted((p.lower or EPOCH, p.upper or EPOCH) for p in existing)
        for (_, upper), (lower, _) in itertools.pairwise(ranges):
            assert upper <= lower
        filed = MINUTE.filing(clock)
        for offset in range(-600, 600, 7):  # any event time: filed under a partition there
            key = filed(clock + timedelta(seconds=offset))
            assert any(lo <= key < hi for lo, hi in ranges), (clock, offset)
        clock += MINUTE.width / 4


def test_a_minute_wide_partition_is_named_by_its_minute() -> None:
    lowers = [MINUTE.slot_of(NOW + n * MINUTE.width) for n in range(3)]
    names = [partition_name("deliveries", lower) for lower in lowers]
    assert names == [
        "deliveries_p20261123_1234",
        "deliveries_p20261123_1235",
        "deliveries_p20261123_1236",
    ]


def test_an_events_time_is_its_key_whenever_its_copies_are_written() -> None:
    event_time = NOW - timedelta(seconds=50)
    # Written either side of a partition boundary (12:34 and 12:35): the same key.
    first = MINUTE.log_time_of(event_time, NOW)
    again = MINUTE.log_time_of(event_time, NOW + timedelta(seconds=30))
    assert MINUTE.slot_of(NOW) != MINUTE.slot_of(NOW + timedelta(seconds=30))
    assert first == again == event_time


@pytest.mark.parametrize(
    "event_time",
    [
        NOW - timedelta(days=400),  # older than the retention (a stream backlog)
        NOW + timedelta(days=2),  # further ahead than the partitions made ahead
        datetime(1, 1, 2, tzinfo=UTC),
        datetime(9998, 12, 31, tzinfo=UTC),
    ],
)
def test_an_event_time_no_partition_surely_holds_files_under_the_current_partition(
    event_time: datetime,
) -> None:
    assert MINUTE.log_time_of(event_time, NOW) == MINUTE.slot_of(NOW)


def test_an_event_time_without_offset_is_read_as_utc() -> None:
    naive = (NOW - timedelta(seconds=5)).replace(tzinfo=None)
    assert MINUTE.log_time_of(naive, NOW) == naive.replace(tzinfo=UTC)


@pytest.mark.parametrize(
    ("expression", "bounds"),
    [
        (
            "FOR VALUES FROM ('2026-11-23 00:00:00+00') TO ('2026-11-24 00:00:00+00')",
            (datetime(2026, 11, 23, tzinfo=UTC), datetime(2026, 11, 24, tzinfo=UTC)),
        ),
        (
            "FOR VALUES FROM (MINVALUE) TO ('2026-11-23 09:17:00+00')",
            (None, datetime(2026, 11, 23, 9, 17, tzinfo=UTC)),
        ),
        (
            "FOR VALUES FROM ('2026-11-23 00:00:00+00') TO (MAXVALUE)",
            (
                datetime(2026, 11, 23, tzinfo=UTC),
                None,
            ),
        ),
        ("DEFAULT", None),
        ("FOR VALUES IN (1)", None),
        ("FOR VALUES FROM ('soon') TO ('later')", None),
        ("FOR VALUES FROM ('2026-11-23 00:00:00') TO (MAXVALUE)", None),
        ("", None),
    ],
)
def test_a_partitions_bounds_are_read_from_its_expression_or_refused(
    expression: str, bounds: tuple[datetime | None, datetime | None] | None
) -> None:
    assert parse_bounds(expression) == bounds
