"""The event types scraper-manager emits, registered with webhook-hub at startup."""

from servicekit.events import EventTypeRegistry

registry = EventTypeRegistry("scraper-manager")
