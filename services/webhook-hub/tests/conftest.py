from __future__ import annotations

from typing import Any

import pytest
from servicekit.testing.service import ServiceUnderTest
from webhook_hub.app import create_app
from webhook_hub.cli import MIGRATIONS
from webhook_hub.settings import Settings


def error_text(body: dict[str, Any]) -> str:
    """The flat envelope: `{"error": <text>, "code": <code>}`."""
    assert set(body) >= {"error", "code"}
    assert isinstance(body["error"], str)
    return str(body["error"])


@pytest.fixture(scope="session")
def service() -> ServiceUnderTest:
    return ServiceUnderTest(
        command="webhook-hub",
        settings=Settings,
        create_app=create_app,
        migrations=MIGRATIONS,
        api_prefix="/webhooks",
        error_text=error_text,
    )
