"""What a service's test suite tells the plugin about the service, once."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import FastAPI

from servicekit.settings import ServiceSettings


@dataclass(frozen=True)
class ServiceUnderTest:
    command: str  # the console script
    settings: type[ServiceSettings]
    create_app: Callable[[Any], FastAPI]
    migrations: Path
    api_prefix: str  # where its key-management API lives
    error_text: Callable[[Any], str]  # reads the message out of its error envelope
    validation_status: int = 422  # what it answers invalid input with (422 or 400)


def flat_error_text(body: Any) -> str:
    """Reads the flat envelope `{"error": <text>, "code": <code>}` that webhook-hub and
    scraper-manager answer errors with."""
    assert set(body) >= {"error", "code"}
    assert isinstance(body["error"], str)
    return str(body["error"])
