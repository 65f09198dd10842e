from __future__ import annotations

from typing import Any

import pytest
from commerce_content.app import create_app
from commerce_content.cli import MIGRATIONS
from commerce_content.settings import Settings
from servicekit.testing.service import ServiceUnderTest


def error_text(body: dict[str, Any]) -> str:
    """The resource API envelope: `{"error": {"code": ..., "message": ...}}`."""
    assert set(body["error"]) >= {"code", "message"}
    return str(body["error"]["message"])


@pytest.fixture(scope="session")
def service() -> ServiceUnderTest:
    return ServiceUnderTest(
        command="commerce-content",
        settings=Settings,
        create_app=create_app,
        migrations=MIGRATIONS,
        api_prefix="/api/v1",
        error_text=error_text,
    )
