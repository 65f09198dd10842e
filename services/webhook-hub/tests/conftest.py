from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from servicekit.testing import serve_app
from webhook_hub.app import create_app
from webhook_hub.cli import MIGRATIONS
from webhook_hub.settings import Settings


@pytest.fixture(scope="session")
def migrations_dir() -> Path:
    return MIGRATIONS


@pytest.fixture(scope="session")
def service_settings(database_url: str, nats_url: str) -> Settings:
    return Settings(database_url=database_url, nats_url=nats_url, log_json=False)


@pytest.fixture
async def client(service_settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    async with serve_app(create_app(service_settings)) as http:
        yield http


@pytest.fixture(scope="session")
def service_command() -> str:
    return "webhook-hub"


@pytest.fixture(scope="session")
def api_prefix() -> str:
    return "/webhooks"


@pytest.fixture(scope="session")
def error_text() -> Any:
    """webhook-hub's envelope: `{"error": <text>, "code": <code>}`."""

    def read(body: dict[str, Any]) -> str:
        assert set(body) >= {"error", "code"}
        assert isinstance(body["error"], str)
        return str(body["error"])

    return read
