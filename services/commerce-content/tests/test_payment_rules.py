"""Pure decisions of checkout, payment notifications, stock and the contact form."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from commerce_content.orders.notifications import (
    CheckoutSessionObject,
    ExpectedPayment,
    payment_mismatch,
)
from commerce_content.orders.stock import quantities, release_due_before
from commerce_content.payments.provider import LineItem, minor_total
from commerce_content.text_rules import MESSAGE_WHITESPACE, has_control_characters

EXPECTED = ExpectedPayment(session_id="cs_1", amount_total=4998, currency="usd")


def paid(**overrides: object) -> CheckoutSessionObject:
    fields: dict[str, object] = {
        "id": "cs_1",
        "payment_status": "paid",
        "amount_total": 4998,
        "currency": "usd",
        "metadata": {"order_id": "x"},
    }
    fields.update(overrides)
    return CheckoutSessionObject.model_validate(fields)


def test_a_session_matching_the_order_pays_it() -> None:
    assert payment_mismatch(EXPECTED, paid()) is None
    assert payment_mismatch(EXPECTED, paid(currency="USD")) is None


@pytest.mark.parametrize(
    ("overrides", "words"),
    [
        ({"amount_total": 1}, "amount_total 1"),
        ({"amount_total": None}, "amount_total None"),
        ({"currency": "eur"}, "currency 'eur'"),
        ({"id": "cs_other"}, "not this order's payment session"),
    ],
)
def test_a_session_differing_in_amount_currency_or_id_does_not_pay(
    overrides: dict[str, object], words: str
) -> None:
    problem = payment_mismatch(EXPECTED, paid(**overrides))
    assert problem is not None
    assert words in problem


def test_an_order_without_a_payment_session_is_never_paid() -> None:
    expected = ExpectedPayment(session_id=None, amount_total=4998, currency="usd")
    assert payment_mismatch(expected, paid()) is not None


def test_the_amount_asked_for_is_the_sum_of_unit_amounts_times_quantities() -> None:
    lines = [LineItem("a", Decimal("19.99"), 2), LineItem("b", Decimal("0.125"), 3)]
    assert minor_total(lines) == 1999 * 2 + 13 * 3


def test_quantities_add_up_per_product() -> None:
    assert quantities([(1, 2), (2, 1), (1, 3)]) == {1: 5, 2: 1}


def test_reservations_are_given_back_a_grace_period_after_they_expire() -> None:
    now = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
    assert release_due_before(now, 600) == now - timedelta(minutes=10)


@pytest.mark.parametrize("value", ["a\r\nBcc: x", "a\nb", "a\x00", "a\x7f", "a\x85", "a\u2028"])
def test_line_breaks_and_control_characters_are_refused_in_a_name(value: str) -> None:
    assert has_control_characters(value)


def test_names_in_any_script_are_accepted() -> None:
    assert not has_control_characters("Zoë Åsa 李 \u0646\u200c\u0627\u0645")


def test_a_message_keeps_its_line_breaks_and_tabs_but_not_other_controls() -> None:
    assert not has_control_characters("Hi,\r\n\tthere", MESSAGE_WHITESPACE)
    assert has_control_characters("Hi\x1b[31m", MESSAGE_WHITESPACE)
