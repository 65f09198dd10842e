"""Retry schedules as people write them, and which schedule and timeout are in effect."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from webhook_hub.subscriptions.retry_settings import (
    DurationRefused,
    Source,
    check_schedule,
    check_wait,
    format_duration,
    in_effect,
    parse_duration,
)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("5s", 5),
        ("1m", 60),
        ("10m", 600),
        ("1h", 3600),
        ("1d", 86400),
        ("1h30m", 5400),
        (" 2H ", 7200),
        ("90s", 90),
    ],
)
def test_a_duration_is_a_number_and_a_unit(text: str, seconds: int) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    "text", ["", "5", "5 s", "5x", "-5s", "1.5h", "s", "0s", "0m0s", "1w", "9" * 50 + "s"]
)
def test_anything_else_is_refused_with_a_reason(text: str) -> None:
    refused = parse_duration(text)
    assert isinstance(refused, DurationRefused)
    assert refused.reason


@pytest.mark.parametrize("value", [5, None, 1.5, ["5s"]])
def test_a_value_that_is_not_text_is_refused(value: object) -> None:
    assert isinstance(parse_duration(value), DurationRefused)


@given(st.text(max_size=60))
def test_parsing_is_total_any_text_gives_positive_seconds_or_a_refusal(text: str) -> None:
    parsed = parse_duration(text)
    assert isinstance(parsed, DurationRefused) or (isinstance(parsed, int) and parsed > 0)


@given(st.integers(min_value=1, max_value=7 * 86400))
def test_a_formatted_duration_reads_back_as_the_same_seconds(seconds: int) -> None:
    assert parse_duration(format_duration(seconds)) == seconds


def test_a_wait_is_kept_in_its_shortest_form() -> None:
    assert [check_wait(w) for w in ["60s", "120m", "24h", "90s"]] == ["1m", "2h", "1d", "90s"]


def test_the_services_fractional_seconds_are_shown_as_seconds() -> None:
    assert format_duration(0.5) == "0.5s"


def test_a_schedule_has_at_most_20_waits() -> None:
    assert len(check_schedule(["1s"] * 20)) == 20
    with pytest.raises(ValueError, match="at most 20"):
        check_schedule(["1s"] * 21)


def test_a_schedule_adds_up_to_7_days_at_most() -> None:
    assert check_schedule(["7d"]) == ["7d"]
    with pytest.raises(ValueError, match="7 days"):
        check_schedule(["7d", "1s"])


def test_the_subscriptions_own_values_come_first() -> None:
    effect = in_effect([5], 3, [60], 20, [0.1], 10)
    assert (effect.retry_schedule, effect.retry_schedule_from) == ([5], Source.SUBSCRIPTION)
    assert (effect.timeout_seconds, effect.timeout_seconds_from) == (3, Source.SUBSCRIPTION)


def test_then_the_owners_defaults() -> None:
    effect = in_effect(None, None, [60], 20, [0.1], 10)
    assert (effect.retry_schedule, effect.retry_schedule_from) == ([60], Source.OWNER_DEFAULT)
    assert (effect.timeout_seconds, effect.timeout_seconds_from) == (20, Source.OWNER_DEFAULT)


def test_then_the_services_settings() -> None:
    effect = in_effect(None, None, None, None, [0.1], 10)
    assert (effect.retry_schedule, effect.retry_schedule_from) == ([0.1], Source.SERVICE_DEFAULT)
    assert (effect.timeout_seconds, effect.timeout_seconds_from) == (10, Source.SERVICE_DEFAULT)


def test_an_empty_schedule_is_set_no_retries_not_unset() -> None:
    effect = in_effect([], None, [60], None, [0.1], 10)
    assert (effect.retry_schedule, effect.retry_schedule_from) == ([], Source.SUBSCRIPTION)
