"""A delivery's requests as its attempts sent them, rebuilt from what is stored. Nothing is
stored for this on the delivery path:

- the body is the stored event (`render_body` over the payload's text, the same bytes every
  attempt sends: migration 0013);
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
from datetime import datetime

from servicekit.signing import sign_webhook

from webhook_hub.delivery_engine.jobs import message_id_for, render_body, signed_at
from webhook_hub.delivery_engine.policy import attempt_secrets, changed_since_job
from webhook_hub.models import Delivery, DeliveryAttempt, Subscription


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
        notes = []
        secrets = attempt_secrets(
            subscription.secret,
            subscription.secret_old,
            subscription.secret_rotated_at,
            attempt.attempted_at,
            transition_seconds,
        )
        rotated_at = subscription.secret_rotated_at
        if secrets is not None:
            signature = sign_webhook(message_id, timestamp, body, secrets)
            headers.append(("webhook-signature", signature))
        elif rotated_at is not None and changed_since_job(rotated_at, attempt.attempted_at):
            notes.append(
                "webhook-signature cannot be shown: the signing secret has been rotated since "
                "this attempt, and which secrets signed it is no longer known."
            )
        else:
            notes.append(
                "webhook-signature cannot be shown: this attempt was made as the previous "
                "secret stopped signing, so whether that one signed it too is not known."
            )
        # The attempt's job read the URL and headers; they are today's if nothing changed the
        # subscription since (a subscription never changed had no others).
        unchanged = subscription.updated_at == subscription.created_at or not changed_since_job(
            subscription.updated_at, attempt.attempted_at
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
