"""The foundation contract (health, readiness, OpenAPI, metrics, API keys) for commerce-content."""

from servicekit.testing.conformance import *  # noqa: F403
