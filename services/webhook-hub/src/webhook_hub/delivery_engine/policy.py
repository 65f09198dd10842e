"""When to try again, and which secrets sign: pure functions of the clock."""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
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


# A job signs with the secrets read when it was made (by dispatch or a claim), seconds at most
# before its attempt starts: a job waits `DISPATCH_QUEUE_SECONDS` (2 s) for a slot, then it is
# set aside, and a later claim reads the secrets again. A generous bound on that age.
JOB_AGE_BOUND = timedelta(seconds=60)


def changed_since_job(changed_at: datetime, attempted_at: datetime) -> bool:
    """Whether a change at `changed_at` may have come after the job of an attempt started at
    `attempted_at` was made (then the job may have seen the subscription as it was before)."""
    return changed_at > attempted_at - JOB_AGE_BOUND


def attempt_secrets(
    secret: str,
    secret_old: str | None,
    rotated_at: datetime | None,
    attempted_at: datetime,
    transition_seconds: int,
) -> list[str] | None:
    """The secrets that signed an attempt started at `attempted_at`, from the subscription's
    secrets as they are now; None when that cannot be known: the secret was rotated after the
    attempt's job was made (the secret before the one now kept as old is not kept), or the old
    secret's transition ended while the job was made."""
    if rotated_at is None:
        return [secret]  # never rotated: the one secret it ever had
    if changed_since_job(rotated_at, attempted_at):
        return None
    earliest = attempted_at - JOB_AGE_BOUND
    first = signing_secrets(secret, secret_old, rotated_at, earliest, transition_seconds)
    last = signing_secrets(secret, secret_old, rotated_at, attempted_at, transition_seconds)
    return first if first == last else None


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
