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
