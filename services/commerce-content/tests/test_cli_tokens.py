"""`commerce-content tokens create` issues HS256 JWTs the service's own settings verify."""

from __future__ import annotations

import subprocess

import httpx
import pytest
from commerce_content.settings import Settings
from servicekit.auth.jwt import JWTCodec
from servicekit.testing.conformance import run_cli


def test_tokens_create_prints_a_jwt_with_subject_and_role(service_settings: Settings) -> None:
    result = run_cli(
        "commerce-content", service_settings, "tokens", "create", "--sub", "42", "--role", "manager"
    )
    token = result.stdout.strip().splitlines()[-1]
    codec = JWTCodec(
        service_settings.jwt_secret.get_secret_value(),
        issuer=service_settings.jwt_issuer,
        audience=service_settings.jwt_audience,
    )
    claims = codec.verify(token)
    assert claims["sub"] == "42"
    assert claims["role"] == "manager"


async def test_errors_outside_the_resource_api_use_the_plain_envelope(
    client: httpx.AsyncClient,
) -> None:
    response = await client.get("/api/nowhere")
    assert response.status_code == 404
    assert response.json() == {"error": "Not Found"}


def test_tokens_create_refuses_a_subject_that_is_not_a_user_id(service_settings: Settings) -> None:
    with pytest.raises(subprocess.CalledProcessError) as refused:
        run_cli(
            "commerce-content", service_settings, "tokens", "create", "--sub", "²", "--role", "user"
        )
    assert refused.value.returncode == 2
    assert "--sub is a user id" in refused.value.stderr
