"""Data for servicekit's tests."""

from __future__ import annotations

import uuid

from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig


def unique_event_type(resource: str = "probe") -> str:
    """A type no other test publishes, so each test reads only its own subject."""
    return f"{resource}{uuid.uuid4().hex[:10]}.happened"


async def pull_consumer_on(
    js: JetStreamContext, subject: str, *, ack_wait: float | None = None, prefix: str = "test"
) -> str:
    """A durable pull consumer with explicit acknowledgement on `subject` of the EVENTS
    stream; its name."""
    durable = f"{prefix}-{uuid.uuid4().hex[:8]}"
    await js.add_consumer(
        "EVENTS",
        config=ConsumerConfig(
            durable_name=durable,
            ack_policy=AckPolicy.EXPLICIT,
            ack_wait=ack_wait,
            filter_subject=subject,
        ),
    )
    return durable
