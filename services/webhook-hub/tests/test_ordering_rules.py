"""Ordered delivery's pure rules: what a stored `ordering` means, an event's key under it, and
the portal's ordering editor as typed."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError
from starlette.datastructures import FormData
from webhook_hub.delivery_engine.ordering import (
    FALLBACK_KEY,
    KEY_MAX_CHARS,
    Ordering,
    key_of,
    key_text,
    parse_ordering,
)
from webhook_hub.errors import InvalidExpression
from webhook_hub.portal.forms import OrderingForm, expression_error_text
from webhook_hub.subscriptions.schemas import SubscriptionUpdate


class Returns:
    def __init__(self, value: Any) -> None:
        self.value = value

    def evaluate(self, event: Any) -> Any:
        return self.value


class Raises:
    def evaluate(self, event: Any) -> Any:
        raise KeyError("no such key: order_id")


def test_no_ordering_is_unordered_and_an_empty_one_is_one_sequence() -> None:
    assert parse_ordering(None) is None
    assert parse_ordering({}) == Ordering(None)
    assert parse_ordering({"key": None}) == Ordering(None)
    assert parse_ordering({"key": "event.data.order_id"}) == Ordering("event.data.order_id")


@pytest.mark.parametrize("stored", [[], "x", 5, {"key": 5}, {"key": "  "}])
def test_an_ordering_written_by_hand_wrongly_is_still_ordered_as_one_sequence(
    stored: object,
) -> None:
    assert parse_ordering(stored) == Ordering(None)


def test_keys_are_the_text_of_strings_integers_and_booleans_cut_to_their_bound() -> None:
    assert key_text("order-1") == "order-1"
    assert key_text(42) == "42"
    assert key_text(True) == "true"
    assert key_text("x" * (KEY_MAX_CHARS + 50)) == "x" * KEY_MAX_CHARS
    for unusable in (None, 1.5, [1], {"a": 1}, b"bytes", ""):
        assert key_text(unusable) is None


def test_a_subscription_without_a_key_expression_is_one_sequence_without_error() -> None:
    assert key_of(None, object()) == (FALLBACK_KEY, None)


def test_an_event_whose_key_fails_or_is_unusable_goes_in_the_fallback_sequence_saying_why() -> None:
    key, error = key_of(Raises(), object())
    assert key == FALLBACK_KEY
    assert error is not None
    assert "order_id" in error
    key, error = key_of(Returns(1.5), object())
    assert (key, error) == (FALLBACK_KEY, "the key is float, not a string or integer")
    assert key_of(Returns(""), object()) == (FALLBACK_KEY, "the key is empty")
    assert key_of(Returns("order-9"), object()) == ("order-9", None)


def test_the_ordering_editor_reads_each_mode_into_the_apis_patch() -> None:
    def read(**fields: str) -> dict[str, Any]:
        return OrderingForm.read(FormData(fields)).body()

    assert read(mode="none", key="ignored") == {"ordering": None}
    assert read(mode="sequence") == {"ordering": {"key": None}}
    assert read(mode="key", key=" event.data.order_id ") == {
        "ordering": {"key": "event.data.order_id"}
    }
    assert read(mode="anything else") == {"ordering": None}
    with pytest.raises(ValueError, match="key expression"):
        read(mode="key", key="")


def test_the_ordering_editor_shows_what_is_stored() -> None:
    assert OrderingForm.of(None) == OrderingForm("none", "")
    assert OrderingForm.of({"key": None}) == OrderingForm("sequence", "")
    assert OrderingForm.of({"key": "event.tenant"}) == OrderingForm("key", "event.tenant")


def test_the_ordering_editor_says_what_is_wrong_in_a_sentence() -> None:
    body = OrderingForm("key", "x" * 2001).body()
    with pytest.raises(ValidationError) as refused:
        SubscriptionUpdate.model_validate(body)
    assert expression_error_text(refused.value) == "String should have at most 2000 characters"
    invalid = InvalidExpression("ordering.key", 1, 22, "Syntax error: mismatched input '<EOF>'")
    assert expression_error_text(invalid) == (
        "ordering.key: Syntax error: mismatched input '<EOF>' (line 1, column 22)"
    )
