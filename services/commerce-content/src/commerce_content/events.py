"""The event types commerce-content emits, registered with webhook-hub at startup."""

from servicekit.events import EventTypeRegistry

registry = EventTypeRegistry("commerce-content")
