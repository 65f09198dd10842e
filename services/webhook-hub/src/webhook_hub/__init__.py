"""webhook-hub: Webhook subscriptions and signed, retried delivery of every business event."""

__version__ = "0.1.0"
