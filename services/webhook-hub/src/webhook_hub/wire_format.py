"""The wire format of a delivery, as the sender writes it and the portal's "as sent" rebuilds
it: the body, the `webhook-id`, the `webhook-timestamp` and the secrets that sign it. The
bottom floor both stand on (docs/decisions: the sender inlines some of these for speed, and
`tests/test_sender.py` holds the copies equal)."""

from __future__ import annotations

import functools
import uuid
from datetime import UTC, datetime, timedelta

from pydantic_core import to_json


def signed_at(attempted_at: datetime) -> int:
    """`webhook-timestamp`: the attempt's recorded start in whole Unix seconds (the sender
    inlines it). Taken from `attempted_at`, not from a second clock reading, so the attempt log
    says what was signed. Exact: `timestamp()` divides whole microseconds, correctly rounded,
    and a double near 2**31 s resolves far finer than one, so truncation floors."""
    return int(attempted_at.timestamp())


def message_id_for(delivery_id: uuid.UUID) -> str:
    """`webhook-id`: one per event and subscription, the same on every retry."""
    return f"msg_{delivery_id.hex}"


def render_body(event_type: str, event_time: datetime, payload_json: bytes) -> bytes:
    """The Standard Webhooks payload shape: `{"type", "timestamp", "data"}`, the timestamp in
    UTC as ISO 8601 with `Z` (microseconds only when there are any)."""
    # pydantic_core writes a UTC time as `isoformat` does, with `Z` for the offset: 0.9 µs
    # against 3.0 for `astimezone(UTC).isoformat()` and the replacement. A time without an
    # offset is read as local time, as `astimezone` reads it.
    utc = event_time if event_time.utcoffset() == _NO_OFFSET else event_time.astimezone(UTC)
    return b"".join((_body_opening(event_type), to_json(utc), b',"data":', payload_json, b"}"))


_NO_OFFSET = timedelta(0)


@functools.lru_cache(maxsize=1024)
def _body_opening(event_type: str) -> bytes:
    """`{"type":<the type>,"timestamp":`, made once per type."""
    return b'{"type":' + to_json(event_type) + b',"timestamp":'


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
