"""The foundation contract every service meets, as tests a service's suite imports.

A service's `tests/test_conformance.py` does `from servicekit.testing.conformance import *`
and its conftest provides: `client` (its app, served), `service_settings`, `service_command`
(its console script name), `api_prefix` (where its key API lives) and `error_text` (how to
read the message out of its error envelope).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import psycopg

from servicekit.db.admin import database_url_for, drop_database
from servicekit.settings import ServiceSettings

ErrorText = Callable[[Any], str]

__all__ = [
    "test_api_key_made_by_the_cli_authenticates",
    "test_health_answers_ok",
    "test_metrics_are_exposed",
    "test_migrate_builds_a_fresh_database",
    "test_missing_authorization_is_401_in_the_envelope",
    "test_openapi_and_docs_are_served",
    "test_readiness_reports_database_and_nats",
    "test_too_low_a_level_is_403_in_the_envelope",
    "test_wrong_key_is_401_in_the_envelope",
]


def run_cli(
    command: str, settings: ServiceSettings, *args: str
) -> subprocess.CompletedProcess[str]:
    """Run the service's console script as an operator would, against the test servers."""
    prefix = settings.model_config.get("env_prefix", "")
    env = {
        **os.environ,
        f"{prefix}DATABASE_URL": settings.database_url,
        f"{prefix}NATS_URL": settings.nats_url,
    }
    executable = Path(sys.executable).parent / command
    return subprocess.run(
        [str(executable), *args], env=env, capture_output=True, text=True, timeout=60, check=True
    )


def create_key(
    command: str, settings: ServiceSettings, level: str, owner: str | None = None
) -> str:
    owner = owner or f"owner-{uuid.uuid4().hex[:8]}"
    result = run_cli(command, settings, "api-keys", "create", "--owner", owner, "--level", level)
    return result.stdout.strip().splitlines()[-1]


async def test_health_answers_ok(client: httpx.AsyncClient) -> None:
    response = await client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


async def test_readiness_reports_database_and_nats(client: httpx.AsyncClient) -> None:
    for _ in range(100):
        response = await client.get("/readyz")
        if response.status_code == 200:
            break
        await asyncio.sleep(0.05)
    assert response.status_code == 200
    assert response.json()["checks"] == {"database": True, "nats": True}


async def test_openapi_and_docs_are_served(client: httpx.AsyncClient, api_prefix: str) -> None:
    schema = (await client.get("/openapi.json")).json()
    assert {"/healthz", "/readyz", f"{api_prefix}/api-keys/me"} <= set(schema["paths"])
    assert "HTTPBearer" in schema["components"]["securitySchemes"]
    assert (await client.get("/docs")).status_code == 200


async def test_metrics_are_exposed(client: httpx.AsyncClient) -> None:
    await client.get("/healthz")
    metrics = await client.get("/metrics")
    assert metrics.status_code == 200
    assert "http_requests_total" in metrics.text


async def test_api_key_made_by_the_cli_authenticates(
    client: httpx.AsyncClient,
    service_command: str,
    service_settings: ServiceSettings,
    api_prefix: str,
) -> None:
    key = create_key(service_command, service_settings, "write", owner="cli-made-owner")
    assert key.startswith(service_settings.api_key_prefix + "_")
    response = await client.get(
        f"{api_prefix}/api-keys/me", headers={"Authorization": f"Bearer {key}"}
    )
    assert response.status_code == 200
    assert response.json()["owner"] == "cli-made-owner"
    assert response.json()["level"] == "write"


async def test_missing_authorization_is_401_in_the_envelope(
    client: httpx.AsyncClient, api_prefix: str, error_text: ErrorText
) -> None:
    response = await client.get(f"{api_prefix}/api-keys/me")
    assert response.status_code == 401
    assert error_text(response.json())


async def test_wrong_key_is_401_in_the_envelope(
    client: httpx.AsyncClient,
    api_prefix: str,
    error_text: ErrorText,
    service_settings: ServiceSettings,
) -> None:
    forged = service_settings.api_key_prefix + "_" + "x" * 43
    response = await client.get(
        f"{api_prefix}/api-keys/me", headers={"Authorization": f"Bearer {forged}"}
    )
    assert response.status_code == 401
    assert error_text(response.json())


async def test_too_low_a_level_is_403_in_the_envelope(
    client: httpx.AsyncClient,
    api_prefix: str,
    error_text: ErrorText,
    service_command: str,
    service_settings: ServiceSettings,
) -> None:
    key = create_key(service_command, service_settings, "read")
    response = await client.post(
        f"{api_prefix}/api-keys", json={"level": "read"}, headers={"Authorization": f"Bearer {key}"}
    )
    assert response.status_code == 403
    assert error_text(response.json())


def test_migrate_builds_a_fresh_database(
    service_command: str, service_settings: ServiceSettings
) -> None:
    url = database_url_for(service_settings.database_url, f"migrate_{uuid.uuid4().hex[:8]}")
    fresh = service_settings.model_copy(update={"database_url": url})
    try:
        run_cli(service_command, fresh, "migrate", "--create-database")
        with psycopg.connect(url) as conn:
            tables = {
                row[0]
                for row in conn.execute(
                    "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
                )
            }
        assert {"api_keys", "outbox_events", "processed_events", "alembic_version"} <= tables
    finally:
        drop_database(url)
