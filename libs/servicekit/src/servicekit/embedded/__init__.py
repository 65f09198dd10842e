"""Servers that run from PyPI wheels: PostgreSQL, NATS with JetStream, an SMTP sink."""

from servicekit.embedded.nats import EmbeddedNats
from servicekit.embedded.network import free_port
from servicekit.embedded.postgres import EmbeddedPostgres

__all__ = ["EmbeddedNats", "EmbeddedPostgres", "free_port"]
