"""Test fixtures for every service: real Postgres, real NATS, HTTP and SMTP receivers."""

from servicekit.testing.receiver import HttpReceiver, ReceivedRequest

__all__ = ["HttpReceiver", "ReceivedRequest"]

from servicekit.testing.app import run_http_server, serve_app, use_session

__all__ += ["run_http_server", "serve_app", "use_session"]
