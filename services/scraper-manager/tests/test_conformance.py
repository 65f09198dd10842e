"""The foundation contract (health, readiness, OpenAPI, metrics, API keys) for scraper-manager."""

from servicekit.testing.conformance import *  # noqa: F403
