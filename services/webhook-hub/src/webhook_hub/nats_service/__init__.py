"""nats service."""
