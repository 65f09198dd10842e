"""When to try again, and which secrets sign: pure functions of the clock."""

from __future__ import annotations

import random
from collections.abc import Sequence
from datetime import datetime, timedelta
from email.utils import parsedate_to_datetime

RETRY_AFTER_STATUSES = frozenset({429, 503})


def signing_secrets(
    secret: str,
    secret_old: str | None,
    rotated_at: datetime | None,
    now: datetime,
    transition_seconds: int,
) -> list[str]:
    """The new secret, plus the old one while the rotation's transition lasts."""
    if secret_old and rotated_at and now < rotated_at + timedelta(seconds=transition_seconds):
        return [secret, secret_old]
    return [secret]


def parse_retry_after(value: str | None, now: datetime) -> float | None:
    """Seconds to wait from a `Retry-After` header (delta-seconds or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, (when - now).total_seconds())


def next_attempt_delay(
    attempts_made: int,
    schedule: Sequence[float],
    jitter: float,
    *,
    retry_after: float | None = None,
    retry_after_cap: float = 86400.0,
    rng: random.Random | None = None,
) -> float | None:
    """Seconds until the next attempt after `attempts_made` attempts, or None: give up."""
    if attempts_made > len(schedule):
        return None
    base = schedule[attempts_made - 1]
    spread = (rng or random).uniform(1 - jitter, 1 + jitter) if jitter else 1.0
    delay = base * spread
    if retry_after is not None:
        delay = max(delay, min(retry_after, retry_after_cap))
    return delay
