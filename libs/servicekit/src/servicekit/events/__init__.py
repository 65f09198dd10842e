"""Domain events: CloudEvents envelope, transactional outbox, relay, consumers, type registry."""

from servicekit.events.envelope import CloudEvent, RawCloudEvent, new_event_id, subject_for
from servicekit.events.outbox import record_event
from servicekit.events.registry import EventTypeDefinition, EventTypeRegistry, Visibility

__all__ = [
    "CloudEvent",
    "EventTypeDefinition",
    "EventTypeRegistry",
    "RawCloudEvent",
    "Visibility",
    "new_event_id",
    "record_event",
    "subject_for",
]
