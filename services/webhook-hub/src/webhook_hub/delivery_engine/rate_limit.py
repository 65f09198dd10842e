"""The enforced rate limit of a subscription (issue 32): pure decisions.

The limit is a token bucket shared by every worker, kept in PostgreSQL
(`subscription_rate_buckets`) and spent by the claim that leases the subscription's due
deliveries (delivery_engine/store.py, `CLAIM`): a worker leases at most as many of them as
the bucket holds whole tokens, in the statement that takes the tokens. Deliveries of a limited
subscription are never sent from dispatch's path: they are stored pending (set aside) and
claimed as the bucket allows. What is decided here: the bucket's size, and how soon a worker
that took tokens claims again.
"""

from __future__ import annotations

import math
from collections.abc import Iterable


def effective_burst(rate_per_second: float, burst: int | None) -> int:
    """The bucket's size: the subscription's burst, or one second's worth (at least one
    token, so a rate under 1/s still sends). The claim SQL computes the same."""
    if burst is not None:
        return burst
    return max(1, math.ceil(rate_per_second))


def next_claim_in(rates: Iterable[float], floor: float, ceiling: float) -> float | None:
    """After a claim that leased deliveries of limited subscriptions at `rates` (per second),
    how long until the claim loop should look again, whatever wakes it: the time the fastest
    bucket takes to earn a token, within [floor, ceiling]; None when no limited delivery was
    claimed (the loop waits for NOTIFY or its poll as before). A backlog is then drained at
    its rate, not a bucketful per poll interval."""
    fastest = max((rate for rate in rates if rate > 0), default=None)
    if fastest is None:
        return None
    return min(max(1.0 / fastest, floor), ceiling)
