"""The fair-share admission rule of the delivery engine (pure, no I/O)."""

from __future__ import annotations

import pytest
from webhook_hub.delivery_engine.admission import may_start, owner_share

CAPACITY = 512
FLOOR = 16


def admit(owner: int, total: int, active: int) -> bool:
    return may_start(
        owner_in_flight=owner,
        total_in_flight=total,
        active_owners=active,
        capacity=CAPACITY,
        floor=FLOOR,
    )


@pytest.mark.parametrize(
    ("active", "share"), [(1, 512), (2, 256), (3, 170), (32, 16), (100, 16), (0, 512)]
)
def test_the_share_is_an_equal_part_of_the_slots_but_never_below_the_floor(
    active: int, share: int
) -> None:
    assert owner_share(CAPACITY, active, FLOOR) == share


def test_an_owner_alone_borrows_every_slot_but_the_reserve() -> None:
    assert admit(owner=495, total=495, active=1)
    assert not admit(owner=496, total=496, active=1)


def test_a_newcomer_starts_at_once_when_another_owner_holds_all_it_may() -> None:
    assert admit(owner=0, total=496, active=2)
    assert admit(owner=15, total=511, active=2)


def test_a_newcomer_is_held_at_the_floor_while_the_reserve_is_in_use() -> None:
    assert not admit(owner=16, total=500, active=2)


def test_an_owner_over_its_share_starts_nothing_once_another_is_busy() -> None:
    assert not admit(owner=496, total=400, active=2)
    assert not admit(owner=256, total=300, active=2)
    assert admit(owner=255, total=300, active=2)


def test_nothing_starts_beyond_the_worker_cap() -> None:
    assert not admit(owner=0, total=512, active=2)


def test_many_owners_each_get_the_floor_within_the_cap() -> None:
    assert admit(owner=15, total=200, active=100)
    assert not admit(owner=16, total=200, active=100)
