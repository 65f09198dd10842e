"""The caps on live streams (per session, per owner, per process) and the wake-up pace: pure
decisions."""

from __future__ import annotations

from servicekit.live import CapReached, StreamCaps, StreamCounts
from servicekit.live.admission import fire_delay, refusal_text

CAPS = StreamCaps(per_session=2, per_owner=3, per_process=4)


def test_a_session_gets_its_cap_and_no_more() -> None:
    counts = StreamCounts(CAPS)
    assert counts.admit("s1", "acme") is None
    assert counts.admit("s1", "acme") is None
    assert counts.admit("s1", "acme") is CapReached.SESSION
    assert counts.of_session("s1") == 2


def test_an_owner_is_capped_across_its_sessions() -> None:
    counts = StreamCounts(CAPS)
    for session in ("s1", "s1", "s2"):
        assert counts.admit(session, "acme") is None
    assert counts.admit("s3", "acme") is CapReached.OWNER
    assert counts.of_owner("acme") == 3


def test_the_process_is_capped_across_owners() -> None:
    counts = StreamCounts(CAPS)
    for session, owner in (("a1", "a"), ("a1", "a"), ("b1", "b"), ("c1", "c")):
        assert counts.admit(session, owner) is None
    assert counts.admit("d1", "d") is CapReached.PROCESS
    assert counts.total == 4


def test_a_refused_stream_is_not_counted() -> None:
    counts = StreamCounts(CAPS)
    counts.admit("s1", "acme")
    counts.admit("s1", "acme")
    counts.admit("s1", "acme")  # refused
    assert (counts.total, counts.of_session("s1"), counts.of_owner("acme")) == (2, 2, 2)


def test_a_release_frees_the_slot_for_the_same_session() -> None:
    counts = StreamCounts(CAPS)
    counts.admit("s1", "acme")
    counts.admit("s1", "acme")
    counts.release("s1", "acme")
    assert counts.admit("s1", "acme") is None


def test_nothing_is_kept_once_every_stream_is_released() -> None:
    counts = StreamCounts(CAPS)
    for session, owner in (("s1", "a"), ("s2", "a"), ("s3", "b")):
        counts.admit(session, owner)
    for session, owner in (("s1", "a"), ("s2", "a"), ("s3", "b")):
        counts.release(session, owner)
    assert (counts.total, counts.tracked_keys) == (0, 0)


def test_the_session_cap_is_named_before_the_owners_when_both_are_full() -> None:
    counts = StreamCounts(StreamCaps(per_session=1, per_owner=1, per_process=1))
    counts.admit("s1", "acme")
    assert counts.admit("s1", "acme") is CapReached.SESSION


def test_each_refusal_says_what_to_do() -> None:
    assert "5 live views" in refusal_text(CapReached.SESSION, StreamCaps(5, 20, 2000))
    assert "20 live views" in refusal_text(CapReached.OWNER, StreamCaps(5, 20, 2000))
    assert "reload this page later" in refusal_text(CapReached.PROCESS, StreamCaps(5, 20, 2000))


def test_a_change_after_a_quiet_interval_is_looked_at_at_once() -> None:
    assert fire_delay(last_fired=10.0, now=12.0, min_interval=1.0) == 0.0


def test_a_change_soon_after_a_look_waits_for_the_rest_of_the_interval() -> None:
    assert fire_delay(last_fired=10.0, now=10.25, min_interval=1.0) == 0.75
