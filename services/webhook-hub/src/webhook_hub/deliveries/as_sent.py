"""A delivery's requests as its attempts sent them, rebuilt from what is stored. Nothing is
stored for this on the delivery path:

- the body is the stored event (`render_body` over the payload's text, the same bytes every
  attempt sends: migration 0013); for a subscription with a `transform`, the payload stored
  is the transform's result, the `data` that was sent and signed (dispatch/handler.py);
- `webhook-id` comes from the delivery's id, `webhook-timestamp` from the attempt's recorded
  start (`signed_at`, what the sender signs with);
- `webhook-signature` is computed again with the secrets that signed the attempt, while the
  subscription still keeps them (`attempt_secrets`); otherwise it is said why it cannot be;
- the URL and custom headers are the subscription's, when it has not been changed since the
  attempt's job was made.

Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from servicekit.signing import sign_webhook

from webhook_hub.models import Delivery, DeliveryAttempt, Subscription
from webhook_hub.wire_format import (
    JOB_AGE_BOUND,
    changed_since_job,
    message_id_for,
    render_body,
    signed_at,
    signing_secrets,
)


@dataclass(frozen=True)
class SentRequest:
    """One attempt's request: `url` and `headers` (those webhook-hub sets, as sent), and
    `notes` saying plainly what is left out and why."""

    attempted_at: datetime
    url: str | None
    headers: list[tuple[str, str]]
    notes: list[str]


@dataclass(frozen=True)
class RequestsAsSent:
    body: str
    attempts: list[SentRequest]


def requests_as_sent(
    delivery: Delivery,
    payload_text: str,
    attempts: list[DeliveryAttempt],
    subscription: Subscription,
    *,
    transition_seconds: int,
    user_agent: str,
) -> RequestsAsSent:
    body = render_body(delivery.event_type, delivery.event_time, payload_text.encode())
    message_id = message_id_for(delivery.id)
    sent = []
    for attempt in attempts:
        timestamp = signed_at(attempt.attempted_at)
        headers = [
            ("content-type", "application/json"),
            ("user-agent", user_agent),
            ("webhook-id", message_id),
            ("webhook-timestamp", str(timestamp)),
        ]
        notes: list[str] = []
        secrets, note = attempt_signing(
            subscription.secret,
            subscription.secret_old,
            subscription.secret_rotated_at,
            attempt.attempted_at,
            transition_seconds,
        )
        if secrets is not None:
            headers.append(
                ("webhook-signature", sign_webhook(message_id, timestamp, body, secrets))
            )
        if note is not None:
            notes.append(note)
        # The attempt's job read the URL and headers; they are today's if nothing changed the
        # subscription since (a subscription never changed had no others).
        # A rotation (the last change when `updated_at` is its time) changes neither, for an
        # attempt made after it.
        rotation_only = (
            subscription.updated_at == subscription.secret_rotated_at
            and attempt.attempted_at >= subscription.updated_at
        )
        unchanged = (
            subscription.updated_at == subscription.created_at
            or rotation_only
            or not changed_since_job(subscription.updated_at, attempt.attempted_at)
        )
        if unchanged:
            headers += list(subscription.headers.items())
        else:
            notes.append(
                "The endpoint has been changed since this attempt (edited, disabled or "
                "re-enabled, or its secret rotated): its URL and custom headers of that moment "
                "are not kept, so they are left out."
            )
        url = subscription.endpoint_url if unchanged else None
        sent.append(SentRequest(attempt.attempted_at, url, headers, notes))
    return RequestsAsSent(body.decode(), sent)


def attempt_signing(
    secret: str,
    secret_old: str | None,
    rotated_at: datetime | None,
    attempted_at: datetime,
    transition_seconds: int,
) -> tuple[list[str] | None, str | None]:
    """The secrets whose signatures an attempt's `webhook-signature` shows, and a note, from
    the subscription's secrets as they are now. A note only where the rotation concerns the
    attempt: made before it (the secrets of then are not all kept: no signature), or during
    the overlap of the old secret (both signatures shown, and which the job sent when it may
    have been made before the rotation or as the overlap ended).

    Issue 35: an attempt 37 s after a rotation was said to predate it, its signature hidden
    (`wire_format.attempt_secrets` refuses any attempt within `JOB_AGE_BOUND` of a rotation)."""
    if rotated_at is None:
        return [secret], None  # never rotated: the one secret it ever had
    if attempted_at < rotated_at:
        return None, (
            "webhook-signature cannot be shown: the signing secret has been rotated since "
            "this attempt, and the secret that signed it is no longer kept."
        )
    overlap_end = rotated_at + timedelta(seconds=transition_seconds)
    until = overlap_end.strftime("%Y-%m-%d %H:%M:%S")
    both = signing_secrets(secret, secret_old, rotated_at, attempted_at, transition_seconds)
    if len(both) == 2 and changed_since_job(rotated_at, attempted_at):
        return both, (
            "Signed during the rotation's overlap: the first signature is the new secret's, "
            f"the second the previous secret's (it signs until {until} UTC). This attempt "
            "started within a minute of the rotation; had its job been made just before it, "
            "only the previous secret's signature was sent."
        )
    if len(both) == 2:
        return both, (
            "Signed during the rotation's overlap: the first signature is the new secret's, "
            f"the second the previous secret's (it signs until {until} UTC)."
        )
    if secret_old and attempted_at - JOB_AGE_BOUND < overlap_end:
        return [secret], (
            f"The previous secret stopped signing at {until} UTC, just before this attempt: "
            "had its job been made before then, the previous secret's signature was sent too."
        )
    return [secret], None
