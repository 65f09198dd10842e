"""The sign-in failure limiter (servicekit.auth.throttle): pure, the time passed in."""

from __future__ import annotations

import pytest
from servicekit.auth.throttle import FailureLimiter, client_key


def failed(limiter: FailureLimiter, client: str, times: int, now: float = 0.0) -> None:
    for _ in range(times):
        limiter.record_failure(client, now)


def test_an_address_may_fail_up_to_the_limit_and_is_then_told_to_wait() -> None:
    limiter = FailureLimiter(limit=10, window_seconds=60)
    failed(limiter, "198.51.100.7", 9)
    assert limiter.retry_after("198.51.100.7", 1.0) is None
    failed(limiter, "198.51.100.7", 1)
    assert limiter.retry_after("198.51.100.7", 1.0) == pytest.approx(59.0)


def test_the_wait_ends_when_the_oldest_failure_leaves_the_window() -> None:
    limiter = FailureLimiter(limit=2, window_seconds=60)
    limiter.record_failure("a", 0.0)
    limiter.record_failure("a", 30.0)
    assert limiter.retry_after("a", 59.0) == pytest.approx(1.0)
    assert limiter.retry_after("a", 60.0) is None  # one failure left in the window
    limiter.record_failure("a", 60.0)
    assert limiter.retry_after("a", 61.0) == pytest.approx(29.0)


def test_other_addresses_are_not_held_back_by_one_that_fails() -> None:
    limiter = FailureLimiter(limit=3, window_seconds=60)
    failed(limiter, "a", 3)
    assert limiter.retry_after("a", 0.0) is not None
    assert limiter.retry_after("b", 0.0) is None


def test_an_address_whose_failures_all_expired_is_forgotten() -> None:
    limiter = FailureLimiter(limit=3, window_seconds=60)
    failed(limiter, "a", 2)
    assert limiter.retry_after("a", 61.0) is None
    assert limiter.tracked_clients() == 0


def test_memory_is_bounded_by_forgetting_the_address_that_failed_least_recently() -> None:
    limiter = FailureLimiter(limit=2, window_seconds=60, max_clients=2)
    failed(limiter, "first", 2, now=0.0)
    failed(limiter, "second", 2, now=1.0)
    limiter.record_failure("third", 2.0)
    assert limiter.tracked_clients() == 2
    assert limiter.retry_after("first", 3.0) is None  # evicted
    assert limiter.retry_after("second", 3.0) is not None


def test_a_new_address_takes_the_place_of_expired_ones_first() -> None:
    limiter = FailureLimiter(limit=2, window_seconds=60, max_clients=2)
    failed(limiter, "old", 2, now=0.0)
    failed(limiter, "recent", 2, now=50.0)
    limiter.record_failure("new", 70.0)  # "old" is past its window, "recent" is not
    assert limiter.retry_after("recent", 70.0) is not None
    assert limiter.tracked_clients() == 2


@pytest.mark.parametrize(
    ("host", "key"),
    [
        ("198.51.100.7", "198.51.100.7"),
        ("2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"),
        ("2001:db8:1:2:ffff::1", "2001:db8:1:2::/64"),
        ("::ffff:198.51.100.7", "198.51.100.7"),
        ("testclient", "testclient"),
        (None, "-"),
        ("", "-"),
    ],
)
def test_failures_count_per_ipv4_address_and_per_ipv6_64(host: str | None, key: str) -> None:
    assert client_key(host) == key


def test_a_limiter_needs_a_positive_limit_and_window() -> None:
    with pytest.raises(ValueError, match="must be positive"):
        FailureLimiter(limit=0)
    with pytest.raises(ValueError, match="must be positive"):
        FailureLimiter(window_seconds=0)
