from __future__ import annotations

from typing import Any

import pytest
from scraper_manager.app import create_app
from scraper_manager.cli import MIGRATIONS
from scraper_manager.settings import Settings
from servicekit.testing.service import ServiceUnderTest


def error_text(body: dict[str, Any]) -> str:
    """The flat envelope: `{"error": <text>, "code": <code>}`."""
    assert set(body) >= {"error", "code"}
    assert isinstance(body["error"], str)
    return str(body["error"])


@pytest.fixture(scope="session")
def service() -> ServiceUnderTest:
    return ServiceUnderTest(
        command="scraper-manager",
        settings=Settings,
        create_app=create_app,
        migrations=MIGRATIONS,
        api_prefix="/api/v1",
        error_text=error_text,
    )
