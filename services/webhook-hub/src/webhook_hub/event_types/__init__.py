"""event types."""
