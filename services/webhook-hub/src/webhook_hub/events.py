"""The event types webhook-hub emits, registered with the shared registry at startup."""

from datetime import datetime
from uuid import UUID

from pydantic import BaseModel
from servicekit.events import EventTypeRegistry

registry = EventTypeRegistry("webhook-hub")

SUBSCRIPTION_DISABLED = "subscription.disabled"
TEST_EVENT_TYPE = "webhook.test"


class SubscriptionDisabled(BaseModel):
    subscription_id: UUID
    consumer_id: UUID
    endpoint_url: str
    failure_count: int
    disabled_at: datetime
    reason: str


registry.declare(
    SUBSCRIPTION_DISABLED,
    SubscriptionDisabled,
    description="A subscription was disabled after consecutive failed deliveries or a 410 Gone.",
    example={
        "subscription_id": "6f1c1a52-3c1e-4f55-9d2e-0d4b5a7c9e10",
        "consumer_id": "0b7f5f0e-1d1a-4c87-9a55-3c4f6b2d8e01",
        "endpoint_url": "https://example.com/webhooks",
        "failure_count": 100,
        "disabled_at": "2026-11-22T10:00:00Z",
        "reason": "100 consecutive failed deliveries",
    },
)
