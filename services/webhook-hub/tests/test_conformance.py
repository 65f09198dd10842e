"""The foundation contract (health, readiness, OpenAPI, metrics, API keys) for webhook-hub."""

from servicekit.testing.conformance import *  # noqa: F403
