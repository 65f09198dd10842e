"""The foundation contract (health, readiness, OpenAPI, metrics, API keys) for scraper-manager."""

from collections.abc import Iterator

import pytest
from scraper_manager.settings import Settings
from servicekit.testing.conformance import *  # noqa: F403

from tests.hub import webhook_hub_worker


@pytest.fixture(scope="module")
def webhook_hub(postgres_server_url: str, nats_url: str) -> Iterator[str]:
    with webhook_hub_worker(postgres_server_url, nats_url) as database_url:
        yield database_url


@pytest.fixture
def fuzz_settings(fuzz_settings: Settings, webhook_hub: str) -> Settings:
    """Fuzzing reaches POST /webhooks with valid bodies: a real webhook-hub answers them (a
    503 without one is the documented answer, but a 5xx all the same)."""
    return fuzz_settings
