"""Fair shares of a worker's delivery slots between owners: a pure decision.

Each owner with work in the worker (attempts in flight or waiting) is entitled to an equal
share of the slots, never fewer than a floor. Shares of owners without work are lent: an
owner alone may use every slot but the last `floor`, which stay free so that an owner who
turns up can start at once instead of waiting for someone's slow attempts to end. A slow
owner therefore holds at most its share as soon as others are busy (its attempts beyond the
share, already in flight, are not cut short, but no new ones start until it is back within).
"""

from __future__ import annotations


def owner_share(capacity: int, active_owners: int, floor: int) -> int:
    """The slots one of `active_owners` owners may hold: an equal part, at least `floor`."""
    return max(capacity // max(active_owners, 1), floor)


def may_start(
    *,
    owner_in_flight: int,
    total_in_flight: int,
    active_owners: int,
    capacity: int,
    floor: int,
) -> bool:
    """Whether an owner holding `owner_in_flight` slots may start one more attempt.

    `active_owners` counts the owners with work, this one included."""
    if total_in_flight >= capacity:
        return False
    if owner_in_flight >= owner_share(capacity, active_owners, floor):
        return False
    # The last `floor` slots are only for owners holding fewer than `floor`: newcomers.
    return total_in_flight < capacity - floor or owner_in_flight < floor
