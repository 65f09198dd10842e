"""Domain events: CloudEvents envelope, transactional outbox, relay, consumers, type registry."""

from servicekit.events.envelope import CloudEvent, subject_for
from servicekit.events.outbox import record_event
from servicekit.events.registry import EventTypeDefinition, EventTypeRegistry

__all__ = ["CloudEvent", "EventTypeDefinition", "EventTypeRegistry", "record_event", "subject_for"]
