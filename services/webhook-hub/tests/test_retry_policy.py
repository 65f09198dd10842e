"""The retry schedule, Retry-After and the signing secrets, as pure functions of the clock."""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from webhook_hub.delivery_engine.policy import next_attempt_delay, parse_retry_after
from webhook_hub.settings import DEFAULT_RETRY_SCHEDULE
from webhook_hub.wire_format import attempt_secrets, signed_at, signing_secrets

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)


def test_the_default_schedule_is_5s_5m_30m_2h_5h_10h_10h() -> None:
    assert DEFAULT_RETRY_SCHEDULE == [5, 300, 1800, 7200, 18000, 36000, 36000]


@pytest.mark.parametrize("attempt", range(1, 8))
def test_each_delay_stays_within_20_percent_jitter(attempt: int) -> None:
    rng = random.Random(attempt)
    base = DEFAULT_RETRY_SCHEDULE[attempt - 1]
    for _ in range(200):
        delay = next_attempt_delay(attempt, DEFAULT_RETRY_SCHEDULE, 0.2, rng=rng)
        assert delay is not None
        assert base * 0.8 <= delay <= base * 1.2


def test_after_the_last_retry_the_delivery_gives_up() -> None:
    assert next_attempt_delay(8, DEFAULT_RETRY_SCHEDULE, 0.2) is None


def test_retry_after_lengthens_but_never_shortens_the_wait() -> None:
    assert next_attempt_delay(1, [5.0], 0.0, retry_after=60) == 60
    assert next_attempt_delay(1, [500.0], 0.0, retry_after=60) == 500


def test_retry_after_is_capped() -> None:
    assert next_attempt_delay(1, [5.0], 0.0, retry_after=10**9, retry_after_cap=3600) == 3600


def test_retry_after_reads_seconds_and_http_dates() -> None:
    assert parse_retry_after("120", NOW) == 120
    assert parse_retry_after("Sun, 22 Nov 2026 12:01:00 GMT", NOW) == 60
    assert parse_retry_after("soon", NOW) is None
    assert parse_retry_after(None, NOW) is None


def test_retry_after_takes_only_ascii_digits_as_seconds() -> None:
    # `str.isdigit` is true for "²"; float("²") raises, which stopped a worker's recording.
    assert parse_retry_after("\u00b2", NOW) is None
    assert parse_retry_after("\u0664\u0662", NOW) is None  # Arabic-Indic "42"


def test_retry_after_with_a_minus_zero_zone_is_read_as_utc() -> None:
    # RFC 5322's "-0000" gives a naive datetime, which could not be compared with now.
    assert parse_retry_after("Sun, 22 Nov 2026 12:01:00 -0000", NOW) == 60
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 -0000", NOW) == 0


def test_retry_after_of_more_digits_than_a_float_holds_is_a_long_finite_wait() -> None:
    seconds = parse_retry_after("9" * 400, NOW)
    assert seconds is not None
    assert math.isfinite(seconds)
    assert seconds > 86400


@settings(max_examples=2000, deadline=None)
@given(st.text())
def test_retry_after_parses_any_text_to_a_finite_wait_or_none(value: str) -> None:
    seconds = parse_retry_after(value, NOW)
    assert seconds is None or (math.isfinite(seconds) and seconds >= 0)


@settings(max_examples=500, deadline=None)
@given(
    st.one_of(
        st.from_regex(
            r"\A[A-Za-z]{3}, [0-9]{1,2} [A-Za-z]{3} [0-9]{1,6} [0-9:]{1,9} [-+A-Z0-9]{0,6}\Z"
        ),
        st.from_regex(r"\A\s*[0-9]{1,30}\s*\Z"),
    )
)
def test_retry_after_parses_date_and_digit_shaped_text_to_a_finite_wait_or_none(
    value: str,
) -> None:
    seconds = parse_retry_after(value, NOW)
    assert seconds is None or (math.isfinite(seconds) and seconds >= 0)


def test_both_secrets_sign_during_the_ten_minute_transition() -> None:
    rotated = NOW - timedelta(minutes=9, seconds=59)
    assert signing_secrets("new", "old", rotated, NOW, 600) == ["new", "old"]


def test_only_the_new_secret_signs_after_the_transition() -> None:
    rotated = NOW - timedelta(minutes=10)
    assert signing_secrets("new", "old", rotated, NOW, 600) == ["new"]


def test_a_never_rotated_subscription_signs_with_its_one_secret() -> None:
    assert signing_secrets("only", None, None, NOW, 600) == ["only"]


# An attempt's secrets, told again later (the portal's delivery page): only when certain.


def test_an_attempt_of_a_never_rotated_subscription_was_signed_with_its_one_secret() -> None:
    assert attempt_secrets("only", None, None, NOW, 600) == ["only"]


def test_an_attempt_well_inside_the_transition_was_signed_with_both_secrets() -> None:
    rotated = NOW - timedelta(minutes=5)
    assert attempt_secrets("new", "old", rotated, NOW, 600) == ["new", "old"]


def test_an_attempt_well_after_the_transition_was_signed_with_the_new_secret() -> None:
    rotated = NOW - timedelta(minutes=20)
    assert attempt_secrets("new", "old", rotated, NOW, 600) == ["new"]


def test_an_attempt_before_the_last_rotation_has_no_known_secrets() -> None:
    # Signed by "old", and by the one before it if that rotation was recent: not kept.
    assert attempt_secrets("new", "old", NOW + timedelta(hours=1), NOW, 600) is None
    # Its job may have been made before the rotation: not certain either.
    assert attempt_secrets("new", "old", NOW - timedelta(seconds=5), NOW, 600) is None


def test_an_attempt_made_as_the_transition_ended_has_no_known_secrets() -> None:
    rotated = NOW - timedelta(minutes=10, seconds=10)  # its job may have been made before
    assert attempt_secrets("new", "old", rotated, NOW, 600) is None


def test_the_signed_timestamp_is_the_attempts_start_in_whole_seconds() -> None:
    assert signed_at(datetime(2026, 11, 22, 12, 0, 0, 999_999, tzinfo=UTC)) == 1795348800
    assert signed_at(datetime(2026, 11, 22, 12, 0, 1, tzinfo=UTC)) == 1795348801
