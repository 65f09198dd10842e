"""When to try again, and which secrets sign: pure functions of the clock."""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

RETRY_AFTER_STATUSES = frozenset({429, 503})


# RFC 9110 §10.2.3: delta-seconds is ASCII digits only (`str.isdigit` also takes "²").
_DELTA_SECONDS = re.compile(r"[0-9]+", re.ASCII)
# More digits than any wait anyone means (`float` of 400 digits is inf): read as the
# longest wait, which the caller caps.
_MAX_DELTA_DIGITS = 12
_LONGEST_DELTA = float("9" * _MAX_DELTA_DIGITS)


def parse_retry_after(value: str | None, now: datetime) -> float | None:
    """Seconds to wait from a `Retry-After` header (delta-seconds or an HTTP date), or None
    when it says neither. Total: any text in, a finite number of seconds >= 0 or None out."""
    if not value:
        return None
    value = value.strip()
    if _DELTA_SECONDS.fullmatch(value):
        return float(value) if len(value.lstrip("0")) <= _MAX_DELTA_DIGITS else _LONGEST_DELTA
    try:
        when = parsedate_to_datetime(value)
        if when.tzinfo is None:
            # RFC 5322's "-0000" zone: the time is UTC, its local offset unknown.
            when = when.replace(tzinfo=UTC)
        seconds = (when - now).total_seconds()
    # The stdlib's date parser raises several kinds on odd input (ValueError, TypeError,
    # IndexError, OverflowError for a year past 9999): any of them means "not a date".
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    return max(0.0, seconds)


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
