"""Servers that run from PyPI wheels: PostgreSQL, NATS with JetStream (one server or a
cluster), an SMTP sink."""

from servicekit.embedded.nats import EmbeddedNats, EmbeddedNatsCluster
from servicekit.embedded.network import free_port
from servicekit.embedded.postgres import EmbeddedPostgres

__all__ = ["EmbeddedNats", "EmbeddedNatsCluster", "EmbeddedPostgres", "free_port"]
