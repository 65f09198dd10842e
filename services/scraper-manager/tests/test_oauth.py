"""OAuth2 for corporate clients: client credentials (tested with authlib's client) and tokens
from an external issuer verified against its JWKS."""

from __future__ import annotations

import subprocess
import time
from collections.abc import AsyncIterator

import httpx
import pytest
from aiohttp import web
from authlib.integrations.httpx_client import AsyncOAuth2Client
from joserfc import jwt
from joserfc.jwk import KeySet, RSAKey
from scraper_manager.app import create_app
from scraper_manager.settings import Settings
from servicekit.testing import run_http_server
from servicekit.testing.conformance import run_cli

TOKEN_URL = "/api/v1/oauth/token"


def register_client(settings: Settings, owner: str, level: str) -> tuple[str, str]:
    out = run_cli(
        "scraper-manager", settings, "oauth-clients", "create", "--owner", owner, "--level", level
    )
    lines = out.stdout.strip().splitlines()
    return lines[0].split(": ", 1)[1], lines[-1]


async def token_answer(
    client: httpx.AsyncClient, client_id: str, secret: str, **form: str
) -> httpx.Response:
    """The token endpoint's answer to a client-credentials grant in the form (RFC 6749 4.4),
    with `form`'s fields (`scope`) added."""
    return await client.post(
        TOKEN_URL,
        data={
            "grant_type": "client_credentials",
            "client_id": client_id,
            "client_secret": secret,
            **form,
        },
    )


def test_oauth_clients_are_never_registered_at_operator_level(service_settings: Settings) -> None:
    with pytest.raises(subprocess.CalledProcessError) as refused:
        register_client(service_settings, "acme", "operator")
    assert "invalid choice: 'operator'" in refused.value.stderr


async def test_authlib_client_gets_a_token_that_works_on_the_api(
    service_settings: Settings,
) -> None:
    client_id, secret = register_client(service_settings, "corp-a", "write")
    async with run_http_server(create_app(service_settings)) as base:
        async with AsyncOAuth2Client(
            client_id, secret, token_endpoint_auth_method="client_secret_basic"
        ) as oauth:
            token = await oauth.fetch_token(base + TOKEN_URL, grant_type="client_credentials")
        assert token["token_type"] == "Bearer"
        assert token["scope"] == "write"
        assert token["expires_in"] == 900
        headers = {"Authorization": f"Bearer {token['access_token']}"}
        async with httpx.AsyncClient(base_url=base) as http:
            created = await http.post(
                "/api/v1/scrapers",
                json={"name": "corp", "url": "http://127.0.0.1:9/"},
                headers=headers,
            )
            assert created.status_code == 201
            me = await http.get("/api/v1/api-keys/me", headers=headers)
            assert me.json()["owner"] == "corp-a"
            delete = await http.delete(f"/api/v1/scrapers/{created.json()['id']}", headers=headers)
            assert delete.status_code == 403  # write scope: no deletes


async def test_credentials_in_the_form_and_a_narrower_scope(
    client: httpx.AsyncClient, service_settings: Settings
) -> None:
    client_id, secret = register_client(service_settings, "corp-b", "admin")
    response = await token_answer(client, client_id, secret, scope="read")
    assert response.status_code == 200
    assert response.json()["scope"] == "read"
    assert response.headers["cache-control"] == "no-store"


@pytest.mark.parametrize(
    ("form", "status", "error"),
    [
        ({"grant_type": "password"}, 400, "unsupported_grant_type"),
        ({"grant_type": "client_credentials"}, 401, "invalid_client"),
        (
            {"grant_type": "client_credentials", "client_id": "smc_nope", "client_secret": "x"},
            401,
            "invalid_client",
        ),
    ],
)
async def test_token_errors_follow_rfc_6749(
    client: httpx.AsyncClient, form: dict[str, str], status: int, error: str
) -> None:
    response = await client.post(TOKEN_URL, data=form)
    assert response.status_code == status
    assert response.json()["error"] == error


async def test_a_wrong_secret_or_a_wider_scope_is_refused(
    client: httpx.AsyncClient, service_settings: Settings
) -> None:
    client_id, secret = register_client(service_settings, "corp-c", "read")
    wrong = await token_answer(client, client_id, secret + "x")
    assert wrong.status_code == 401
    wider = await token_answer(client, client_id, secret, scope="admin")
    assert wider.status_code == 400
    assert wider.json()["error"] == "invalid_scope"


async def test_an_expired_or_foreign_token_is_401(
    client: httpx.AsyncClient, service_settings: Settings
) -> None:
    from scraper_manager.oauth.tokens import codec

    expired = codec(service_settings).issue(
        "smc_x", {"scope": "read", "owner": "o"}, now=int(time.time()) - 7200
    )
    response = await client.get("/api/v1/scrapers", headers={"Authorization": f"Bearer {expired}"})
    assert response.status_code == 401
    response = await client.get("/api/v1/scrapers", headers={"Authorization": "Bearer a.b.c"})
    assert response.status_code == 401


@pytest.fixture
async def external_issuer() -> AsyncIterator[tuple[str, RSAKey]]:
    """An issuer of our own on 127.0.0.1 that publishes its JWKS."""
    key = RSAKey.generate_key(2048, parameters={"kid": "test-key"})
    app = web.Application()

    async def jwks(request: web.Request) -> web.Response:
        return web.json_response(KeySet([key]).as_dict(private=False))

    app.router.add_get("/.well-known/jwks.json", jwks)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    yield f"http://127.0.0.1:{port}", key
    await runner.cleanup()


async def test_tokens_from_the_external_issuer_are_verified_against_its_jwks(
    service_settings: Settings, external_issuer: tuple[str, RSAKey]
) -> None:
    base, key = external_issuer
    settings = service_settings.model_copy(
        update={
            "external_issuer": "https://idp.corp.example",
            "external_jwks_url": f"{base}/.well-known/jwks.json",
            "external_audience": "scraper-manager",
        }
    )
    now = int(time.time())
    claims = {
        "iss": "https://idp.corp.example",
        "aud": "scraper-manager",
        "sub": "corp-d",
        "scope": "read",
        "exp": now + 300,
        "iat": now,
    }
    good = jwt.encode({"alg": "RS256", "kid": "test-key"}, claims, key)
    foreign = jwt.encode(
        {"alg": "RS256", "kid": "test-key"}, {**claims, "iss": "https://evil.example"}, key
    )
    from servicekit.testing import serve_app

    async with serve_app(create_app(settings)) as http:
        ok = await http.get("/api/v1/api-keys/me", headers={"Authorization": f"Bearer {good}"})
        assert ok.status_code == 200
        assert ok.json()["owner"] == "corp-d"
        assert ok.json()["level"] == "read"
        refused = await http.get("/api/v1/scrapers", headers={"Authorization": f"Bearer {foreign}"})
        assert refused.status_code == 401


async def test_an_oauth_token_gets_no_dashboard_link_it_could_outlive(
    client: httpx.AsyncClient, service_settings: Settings
) -> None:
    client_id, secret = register_client(service_settings, "corp-c", "write")
    token = await token_answer(client, client_id, secret)
    headers = {"Authorization": f"Bearer {token.json()['access_token']}"}
    response = await client.post("/api/v1/dashboard-links", headers=headers)
    assert response.status_code == 403
    assert response.json()["code"] == "link_needs_api_key"
