"""`RetryForm.parsed`: the retry editor's form read into the API's own body, or refused with
what is wrong at each input (the endpoint's editor and the owner's defaults share it)."""

from __future__ import annotations

from webhook_hub.portal.retries import RetryForm
from webhook_hub.subscriptions.schemas import DeliveryDefaults, SubscriptionUpdate


def test_an_own_schedule_is_read_into_the_apis_body() -> None:
    form = RetryForm(own_schedule=True, waits=["5s", "", "1m"], timeout_seconds="10")
    body, errors = form.parsed(DeliveryDefaults)
    assert errors == {}
    assert body == DeliveryDefaults.model_validate(
        {"retry_schedule": ["5s", "1m"], "timeout_seconds": 10}
    )


def test_waits_typed_while_the_defaults_are_chosen_are_refused_not_dropped() -> None:
    form = RetryForm(own_schedule=False, waits=["5s"])
    body, errors = form.parsed(SubscriptionUpdate)
    assert body is None
    assert set(errors) == {"retry_schedule"}


def test_a_wait_the_api_refuses_is_told_at_its_row() -> None:
    form = RetryForm(own_schedule=True, waits=["5s", "", "soon"])
    body, errors = form.parsed(SubscriptionUpdate)
    assert body is None
    assert set(errors) == {"wait-3"}
