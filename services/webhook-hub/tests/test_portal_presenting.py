"""How the portal words stored outcomes (issue 35): total functions, any text in."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st
from webhook_hub.portal.forms import parse_delivery_ids, parse_status_filter
from webhook_hub.portal.presenting import (
    UNKNOWN_ERROR,
    delivery_state,
    describe_error,
    health_summary,
    probe_verdict,
    recovered_sentence,
    retried_sentence,
)
from webhook_hub.subscriptions.schemas import Probe

NOW = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("stored", "sentence"),
    [
        ("ConnectionRefusedError: [Errno 111] Connection refused", "Connection refused by the"),
        ("OSError: [Errno 111] Connect call failed ('127.0.0.1', 9)", "Connection refused by"),
        ("timed out after 10 s", "No answer within 10 s"),
        ("refused: 10.0.0.5 is a private address", "address policy refuses"),
        ("gaierror: [Errno -2] Name or service not known", "could not be resolved"),
        ("SSLCertVerificationError: certificate verify failed", "(TLS) failed"),
        ("ConnectionResetError: [Errno 104] Connection reset by peer", "reset the connection"),
        ("HttpFailure: the connection closed before an answer", "closed the connection"),
        ("OSError: [Errno 113] No route to host", "network cannot be reached"),
        ("HttpFailure: invalid HTTP answer: bad status line", "not valid HTTP"),
    ],
)
def test_stored_errors_read_as_sentences(stored: str, sentence: str) -> None:
    said = describe_error(stored)
    assert said is not None
    assert sentence in said


def test_an_error_no_rule_knows_says_the_details_are_below() -> None:
    assert describe_error("WeirdError: something new") == UNKNOWN_ERROR


def test_an_answer_is_worded_by_its_status_code() -> None:
    assert describe_error(None, 503) == "HTTP 503: the receiver failed while handling it."
    assert describe_error("ignored", 403) == "HTTP 403: the receiver refused the request."
    assert describe_error(None, 204) == "Accepted (HTTP 204)."


def test_no_attempt_yet_says_nothing() -> None:
    assert describe_error(None) is None
    assert describe_error("   ") is None


@given(st.text(), st.one_of(st.none(), st.integers()))
def test_any_stored_text_and_code_make_a_sentence_or_nothing(text: str, code: int | None) -> None:
    said = describe_error(text, code)
    assert said is None or said.strip()


def test_a_pending_delivery_with_failed_attempts_is_retrying_in_amber() -> None:
    state = delivery_state("pending", 3, NOW)
    assert (state.label, state.tone, state.next_attempt_at) == ("retrying", "warning", NOW)
    assert (delivery_state("pending", 0, NOW).label, delivery_state("pending", 0, NOW).tone) == (
        "pending",
        "info",
    )
    assert delivery_state("pending", 0, NOW).next_attempt_at is None
    assert delivery_state("failed", 8, None).tone == "bad"


def test_only_a_2xx_probe_is_green() -> None:
    forbidden = probe_verdict(Probe(reachable=True, status_code=403))
    assert (forbidden.label, forbidden.tone) == ("answered with 403", "warning")
    assert probe_verdict(Probe(reachable=True, status_code=200)).tone == "ok"
    down = probe_verdict(Probe(reachable=False, error="Cannot connect: [Errno 111] refused"))
    assert (down.label, down.tone) == ("unreachable", "bad")
    assert "Connection refused by the receiver" in down.sentence


def test_health_names_pending_deliveries_beside_the_rate() -> None:
    assert (
        health_summary({"succeeded": 5, "pending": 4})
        == "5 delivered, 4 pending (100 % of finished)"
    )
    assert health_summary({"pending": 2}) == "0 delivered, 2 pending (none finished)"
    assert health_summary({}) == "no deliveries"


def test_recovery_says_what_it_queued_by_kind() -> None:
    said = recovered_sentence({"failed": 1, "retrying": 3}, NOW)
    assert said == (
        "Queued now: 1 delivery that failed and 3 deliveries waiting for a retry, "
        "created since 2026-11-29 10:00 UTC."
    )
    assert recovered_sentence({"failed": 0, "retrying": 0}, NOW).startswith("Nothing to recover")
    assert retried_sentence(2, 3).startswith("2 deliveries queued for a retry now. 1 of those")


def test_an_empty_or_unknown_status_filter_is_no_filter() -> None:
    assert parse_status_filter("") is None
    assert parse_status_filter("bogus") is None
    assert parse_status_filter(" Failed ") == "failed"


def test_ticked_ids_are_parsed_each_once_and_the_rest_left_out() -> None:
    one = "0b7f5f0e-1d1a-4c87-9a55-3c4f6b2d8e01"
    assert [str(i) for i in parse_delivery_ids([one, "x", one.upper()])] == [one]
