from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from commerce_content.app import create_app
from commerce_content.cli import MIGRATIONS
from commerce_content.settings import Settings
from servicekit.testing import serve_app


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
    return "commerce-content"


@pytest.fixture(scope="session")
def api_prefix() -> str:
    return "/api/v1"


@pytest.fixture(scope="session")
def error_text() -> Any:
    """The resource API's envelope: `{"error": {"code": ..., "message": ...}}`."""

    def read(body: dict[str, Any]) -> str:
        assert set(body["error"]) >= {"code", "message"}
        return str(body["error"]["message"])

    return read
