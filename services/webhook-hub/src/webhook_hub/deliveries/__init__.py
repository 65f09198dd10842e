"""deliveries."""
