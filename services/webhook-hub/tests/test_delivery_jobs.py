"""A delivery job is made as one of two kinds: a first attempt (no row yet) or a stored
delivery (its row exists). Pure: no database."""

from __future__ import annotations

import dataclasses

import pytest
from webhook_hub.delivery_engine.jobs import DeliveryJob, FirstAttempt, StoredDelivery

from tests.job_factories import make_job


def test_a_job_of_neither_kind_is_refused() -> None:
    fields = {f.name: getattr(make_job(), f.name) for f in dataclasses.fields(DeliveryJob)}
    with pytest.raises(TypeError):
        DeliveryJob(**fields)


def test_an_events_first_attempt_has_no_row_and_a_retry_has_one() -> None:
    first, retry = make_job(), make_job(attempts=1)
    assert isinstance(first, FirstAttempt)
    assert isinstance(retry, StoredDelivery)
    assert (first.stored, retry.stored) == (False, True)


def test_a_first_attempt_once_stored_is_the_same_delivery_as_a_stored_one() -> None:
    first = make_job()
    first.order_seq, first.lease_end = 7, 12.5
    stored = first.as_stored()
    assert isinstance(stored, StoredDelivery)
    assert all(
        getattr(stored, f.name) is getattr(first, f.name) for f in dataclasses.fields(DeliveryJob)
    )
