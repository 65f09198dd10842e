"""The foundation contract every service meets, as tests a service's suite imports.

A service's `tests/test_conformance.py` does `from servicekit.testing.conformance import *`
and its conftest provides: `client` (its app, served), `service_settings`, `service_command`
(its console script name), `api_prefix` (where its key API lives) and `error_text` (how to
read the message out of its error envelope).
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from servicekit.db.admin import database_url_for, drop_database
from servicekit.settings import ServiceSettings
from servicekit.testing.app import run_http_server, serve_app
from servicekit.testing.fuzz import fuzz_openapi
from servicekit.testing.service import ServiceUnderTest

ErrorText = Callable[[Any], str]

__all__ = [
    "key_api",
    "test_a_64_mib_header_is_431_and_is_not_read_whole",
    "test_a_body_over_the_limit_is_413_in_the_envelope",
    "test_a_body_that_is_not_utf8_is_refused_in_the_envelope",
    "test_a_head_just_over_the_limit_in_one_read_is_431",
    "test_a_head_just_under_the_limit_is_served",
    "test_a_json_number_no_float_holds_is_refused_and_nothing_changes",
    "test_a_lone_surrogate_in_a_json_body_is_refused_and_nothing_changes",
    "test_a_nul_in_a_form_body_is_refused",
    "test_a_nul_in_a_header_value_is_refused",
    "test_a_nul_in_a_json_body_is_refused_and_nothing_changes",
    "test_a_nul_in_a_json_key_is_refused",
    "test_a_nul_in_a_path_parameter_is_refused",
    "test_a_nul_in_a_query_parameter_is_refused",
    "test_a_wrong_method_is_405_with_every_method_of_the_path",
    "test_api_key_made_by_the_cli_authenticates",
    "test_deeply_nested_json_is_refused_in_the_envelope",
    "test_deeply_nested_json_under_another_label_is_refused",
    "test_delete_on_api_keys_me_is_405",
    "test_every_response_carries_hsts_in_production",
    "test_health_answers_ok",
    "test_metrics_are_exposed",
    "test_migrate_builds_a_fresh_database",
    "test_missing_authorization_is_401_in_the_envelope",
    "test_openapi_and_docs_are_served",
    "test_openapi_fuzz_with_nul_and_surrogates_finds_no_server_error",
    "test_options_answers_the_methods_of_the_path",
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
        [str(executable), *args], env=env, capture_output=True, text=True, timeout=100, check=True
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


@pytest.mark.parametrize("path", ["/healthz", "/nowhere", "{api_prefix}/api-keys"])
async def test_every_response_carries_hsts_in_production(
    service: ServiceUnderTest, service_settings: ServiceSettings, api_prefix: str, path: str
) -> None:
    """Whatever it answers (200, 404, 401): HSTS on all of it, from servicekit's middleware."""
    production = service_settings.model_copy(update={"env": "production"})
    async with serve_app(service.create_app(production)) as http:
        response = await http.get(path.format(api_prefix=api_prefix))
    assert response.headers["strict-transport-security"] == ("max-age=63072000; includeSubDomains")


# --- the input guard (servicekit.web.input_guard): the same answers in every service ---------


@dataclass
class KeyApi:
    """The service's key API (`{api_prefix}/api-keys`) called as an admin, and how the
    service answers a refusal (its status for a validation error, its error envelope)."""

    client: httpx.AsyncClient
    prefix: str
    headers: dict[str, str]
    error_text: ErrorText
    validation_status: int

    @property
    def keys(self) -> str:
        return f"{self.prefix}/api-keys"

    async def key_count(self) -> int:
        response = await self.client.get(self.keys, headers=self.headers)
        assert response.status_code == 200
        return len(response.json())

    async def post_json(self, content: bytes) -> httpx.Response:
        """`content` posted to the key API, labelled JSON."""
        return await self.client.post(
            self.keys, content=content, headers={**self.headers, "Content-Type": "application/json"}
        )

    async def assert_refused_and_unchanged(self, content: bytes, says: str) -> None:
        before = await self.key_count()
        response = await self.post_json(content)
        assert response.status_code == self.validation_status, response.text
        assert says in self.error_text(response.json())
        assert await self.key_count() == before


@pytest.fixture
def key_api(
    client: httpx.AsyncClient,
    api_prefix: str,
    admin_key_headers: dict[str, str],
    error_text: ErrorText,
    validation_status: int,
) -> KeyApi:
    return KeyApi(client, api_prefix, admin_key_headers, error_text, validation_status)


# A body nested far deeper than any parser's stack allows.
DEEPLY_NESTED = b'{"level": "read", "description": ' + b"[" * 20_000 + b"]" * 20_000 + b"}"


async def test_a_nul_in_a_json_body_is_refused_and_nothing_changes(key_api: KeyApi) -> None:
    body = b'{"level": "read", "description": "a\\u0000b"}'
    await key_api.assert_refused_and_unchanged(body, "NUL")


async def test_a_lone_surrogate_in_a_json_body_is_refused_and_nothing_changes(
    key_api: KeyApi,
) -> None:
    body = b'{"level": "read", "description": "a\\ud800b"}'
    await key_api.assert_refused_and_unchanged(body, "surrogate")


async def test_a_nul_in_a_json_key_is_refused(key_api: KeyApi) -> None:
    body = b'{"level": "read", "x\\u0000": 1}'
    await key_api.assert_refused_and_unchanged(body, "key")


@pytest.mark.parametrize("number", [b"1e400", b"-1e400", b"NaN", b"Infinity"])
async def test_a_json_number_no_float_holds_is_refused_and_nothing_changes(
    key_api: KeyApi, number: bytes
) -> None:
    # Read as `inf` or `nan`, such a number reached PostgreSQL's json or a response: a 500.
    body = b'{"level": "read", "description": ' + number + b"}"
    await key_api.assert_refused_and_unchanged(
        body, "body.description is a number outside the range of a 64-bit float"
    )


async def test_deeply_nested_json_is_refused_in_the_envelope(key_api: KeyApi) -> None:
    await key_api.assert_refused_and_unchanged(DEEPLY_NESTED, "nested")


@pytest.mark.parametrize("content_type", [None, "text/plain"])
async def test_deeply_nested_json_under_another_label_is_refused(
    key_api: KeyApi, content_type: str | None
) -> None:
    # Frameworks and hand-written endpoints parse JSON whatever the label says.
    headers = {**key_api.headers, **({"Content-Type": content_type} if content_type else {})}
    response = await key_api.client.post(key_api.keys, content=DEEPLY_NESTED, headers=headers)
    assert response.status_code == key_api.validation_status, response.text
    assert "nested" in key_api.error_text(response.json())


async def test_a_body_that_is_not_utf8_is_refused_in_the_envelope(key_api: KeyApi) -> None:
    body = b'{"level": "read", "description": "caf\xe9"}'
    await key_api.assert_refused_and_unchanged(body, "UTF-8")


async def test_a_nul_in_a_query_parameter_is_refused(key_api: KeyApi) -> None:
    response = await key_api.client.get(f"{key_api.keys}?owner=a%00b", headers=key_api.headers)
    assert response.status_code == key_api.validation_status
    assert "NUL" in key_api.error_text(response.json())


async def test_a_nul_in_a_path_parameter_is_refused(key_api: KeyApi) -> None:
    response = await key_api.client.delete(f"{key_api.keys}/a%00b", headers=key_api.headers)
    assert response.status_code == key_api.validation_status
    assert "NUL" in key_api.error_text(response.json())


async def test_a_nul_in_a_header_value_is_refused(key_api: KeyApi) -> None:
    # Real servers may refuse it first; the guard holds for any server that passes it on.
    headers = {**key_api.headers, "X-Forwarded-For": "a\x00b"}
    response = await key_api.client.get(f"{key_api.keys}/me", headers=headers)
    assert response.status_code == key_api.validation_status
    assert "NUL" in key_api.error_text(response.json())


async def test_a_nul_in_a_form_body_is_refused(key_api: KeyApi) -> None:
    response = await key_api.client.post(
        key_api.keys, data={"level": "read\x00"}, headers=key_api.headers
    )
    assert response.status_code == key_api.validation_status
    assert "NUL" in key_api.error_text(response.json())


async def test_a_body_over_the_limit_is_413_in_the_envelope(
    key_api: KeyApi, service_settings: ServiceSettings
) -> None:
    padding = "x" * service_settings.max_request_body_bytes
    response = await key_api.client.post(
        key_api.keys, json={"level": "read", "description": padding}, headers=key_api.headers
    )
    assert response.status_code == 413
    assert key_api.error_text(response.json())


# --- methods: what OpenAPI says a path has is what it answers -------------------------------


async def test_options_answers_the_methods_of_the_path(
    client: httpx.AsyncClient, api_prefix: str
) -> None:
    response = await client.options(f"{api_prefix}/api-keys")
    assert response.status_code == 204
    assert set(response.headers["Allow"].split(", ")) == {"GET", "POST", "OPTIONS"}


async def test_a_wrong_method_is_405_with_every_method_of_the_path(
    client: httpx.AsyncClient, api_prefix: str, error_text: ErrorText
) -> None:
    response = await client.put(f"{api_prefix}/api-keys")
    assert response.status_code == 405
    assert set(response.headers["Allow"].split(", ")) == {"GET", "POST"}
    assert error_text(response.json())


async def test_delete_on_api_keys_me_is_405(
    client: httpx.AsyncClient, api_prefix: str, admin_key_headers: dict[str, str]
) -> None:
    response = await client.delete(f"{api_prefix}/api-keys/me", headers=admin_key_headers)
    assert response.status_code == 405
    assert response.headers["Allow"] == "GET"


# --- request heads: bounded by the server itself (servicekit.web.server) --------------------


def _send_head(port: int, header_bytes: int) -> tuple[bytes, int]:
    """Send a GET whose one header holds `header_bytes`; the answer's first bytes and how many
    bytes the server took before it closed (or all of them)."""
    sent = 0
    with socket.create_connection(("127.0.0.1", port), timeout=30) as connection:
        connection.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\nX-Big: ")
        chunk = b"a" * 65536
        try:
            while sent < header_bytes:
                piece = chunk[: header_bytes - sent]
                connection.sendall(piece)
                sent += len(piece)
            connection.sendall(b"\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass
        try:
            answer = connection.recv(4096)
        except ConnectionResetError:
            answer = b""
    return answer, sent


async def test_a_64_mib_header_is_431_and_is_not_read_whole(
    service: Any, service_settings: ServiceSettings
) -> None:
    app = service.create_app(service_settings)
    async with run_http_server(app) as url:
        port = int(url.rsplit(":", 1)[1])
        answer, sent = await asyncio.to_thread(_send_head, port, 64 * 1024 * 1024)
    assert answer.startswith(b"HTTP/1.1 431"), answer[:200]
    # The server closed long before the 64 MiB were sent (socket buffers hold a few MiB).
    assert sent < 16 * 1024 * 1024


async def test_a_head_just_under_the_limit_is_served(
    service: Any, service_settings: ServiceSettings
) -> None:
    app = service.create_app(service_settings)
    async with run_http_server(app) as url:
        port = int(url.rsplit(":", 1)[1])
        size = service_settings.max_request_header_bytes - 1024
        answer, sent = await asyncio.to_thread(_send_head, port, size)
    assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
    assert sent == size


# --- schemathesis over the OpenAPI document (servicekit.testing.fuzz) -----------------------


async def test_openapi_fuzz_with_nul_and_surrogates_finds_no_server_error(
    service: Any, fuzz_settings: ServiceSettings, fuzz_headers: dict[str, str]
) -> None:
    app = service.create_app(fuzz_settings)
    async with run_http_server(app) as url:
        operations, findings = await asyncio.to_thread(fuzz_openapi, url, fuzz_headers)
    assert operations > 3
    assert not findings, "\n\n".join(findings)


async def test_a_head_just_over_the_limit_in_one_read_is_431(
    service: Any, service_settings: ServiceSettings
) -> None:
    app = service.create_app(service_settings)
    async with run_http_server(app) as url:
        port = int(url.rsplit(":", 1)[1])
        size = service_settings.max_request_header_bytes + 1024
        answer, _ = await asyncio.to_thread(_send_head, port, size)
    assert answer.startswith(b"HTTP/1.1 431"), answer[:200]
