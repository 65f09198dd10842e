"""The event types webhook-hub emits, registered with webhook-hub at startup."""

from servicekit.events import EventTypeRegistry

registry = EventTypeRegistry("webhook-hub")
