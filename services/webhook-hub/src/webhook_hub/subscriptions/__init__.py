"""subscriptions."""
