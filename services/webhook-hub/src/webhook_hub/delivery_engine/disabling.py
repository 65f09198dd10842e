"""Auto-disable: the decision (pure) and its side, the `subscription.disabled` event and the
mail to the owner."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from servicekit.events import record_event
from sqlalchemy import text
from sqlmodel.ext.asyncio.session import AsyncSession

from webhook_hub.events import SUBSCRIPTION_DISABLED, SubscriptionDisabled
from webhook_hub.models import MailMessage

_DISABLE = text(
    """
    UPDATE subscriptions SET is_active = false, disabled_at = :now, disabled_reason = :reason,
        updated_at = :now
    WHERE id = :id AND is_active
    RETURNING id, consumer_id, owner, endpoint_url, failure_count
    """
)
_CONSUMER_EMAIL = text("SELECT email FROM consumers WHERE owner = :owner")


def disable_reason(*, gone: bool, failure_count: int, threshold: int) -> str | None:
    """Why an active subscription is to be disabled now, or None to keep it: its endpoint
    answered 410 Gone, or it has failed `threshold` times in a row."""
    if gone:
        return "the endpoint answered 410 Gone"
    if failure_count >= threshold:
        return f"{failure_count} consecutive failed deliveries"
    return None


async def disable_subscription(
    session: AsyncSession, subscription_id: uuid.UUID, reason: str
) -> bool:
    """Disable, publish `subscription.disabled` to its owner, and mail the owner."""
    connection = await session.connection()
    now = datetime.now(UTC)
    row = (
        await connection.execute(_DISABLE, {"id": subscription_id, "now": now, "reason": reason})
    ).first()
    if row is None:
        return False
    payload = SubscriptionDisabled(
        subscription_id=row.id,
        consumer_id=row.consumer_id,
        endpoint_url=row.endpoint_url,
        failure_count=row.failure_count,
        disabled_at=now,
        reason=reason,
    )
    await record_event(session, SUBSCRIPTION_DISABLED, payload, tenant=row.owner)
    email = await connection.scalar(_CONSUMER_EMAIL, {"owner": row.owner})
    if email:
        session.add(
            MailMessage(
                recipient=email,
                subject=f"Webhook subscription disabled: {row.endpoint_url}",
                body=(
                    f"Your webhook subscription {row.id} to {row.endpoint_url} was disabled "
                    f"on {now.isoformat()} because {reason}.\n\n"
                    "No events are delivered to it until you re-enable it with "
                    f'PATCH /webhooks/subscriptions/{row.id} and {{"is_active": true}}. '
                    "Deliveries that failed meanwhile can be sent again with "
                    f"POST /webhooks/subscriptions/{row.id}/recover.\n"
                ),
            )
        )
        await session.flush()
    return True
