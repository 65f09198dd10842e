"""A bearer JWT names its user in `sub` (spec, part C): a subject that cannot be a user id
makes the token invalid (401) wherever tokens are accepted, never a 500."""

from __future__ import annotations

import time

import httpx
import pytest
from commerce_content.identity.dependencies import jwt_codec, user_id_of
from commerce_content.settings import Settings
from joserfc import jwt
from joserfc.jwk import OctKey
from servicekit.auth.jwt import InvalidToken

NOT_USER_IDS = [
    "²",
    "٣",
    "9" * 5000,
    "9" * 20,
    "2147483648",
    "0",
    "-1",
    "+1",
    " 1",
    "1a",
    "",
    "bob",
]


def test_a_subject_of_ascii_digits_in_the_database_range_is_a_user_id() -> None:
    assert user_id_of("42") == 42
    assert user_id_of("2147483647") == 2147483647


@pytest.mark.parametrize("subject", [*NOT_USER_IDS, 42, None, ["1"]])
def test_any_other_subject_makes_the_token_invalid(subject: object) -> None:
    with pytest.raises(InvalidToken):
        user_id_of(subject)


def bearer(settings: Settings, subject: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {jwt_codec(settings).issue(subject, {'role': 'admin'})}"}


@pytest.mark.parametrize("subject", ["²", "9" * 5000, "9" * 20])
async def test_creating_an_article_with_such_a_token_is_401(
    client: httpx.AsyncClient, service_settings: Settings, subject: str
) -> None:
    response = await client.post(
        "/api/v1/articles", json={"title": "Hello"}, headers=bearer(service_settings, subject)
    )
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthorized"


@pytest.mark.parametrize("subject", ["²", "9" * 5000, "9" * 20])
async def test_the_content_api_and_the_admin_action_answer_invalid_token(
    client: httpx.AsyncClient, service_settings: Settings, subject: str
) -> None:
    headers = bearer(service_settings, subject)
    content = await client.get("/api/products/", headers=headers)
    admin = await client.post("/api/admin-action", json={"action": "x"}, headers=headers)
    assert (content.status_code, content.json()) == (401, {"error": "Invalid token"})
    assert admin.status_code == 401


@pytest.mark.parametrize("subject", ["²", "9" * 5000, "9" * 20])
async def test_graphql_answers_401_to_such_a_token(
    graphql_url: str, service_settings: Settings, subject: str
) -> None:
    async with httpx.AsyncClient() as http:
        response = await http.post(
            graphql_url,
            json={"query": "{ viewer { id } }"},
            headers=bearer(service_settings, subject),
        )
    assert response.status_code == 401
    assert response.json()["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"


async def test_a_token_of_sub_iat_exp_and_role_signed_with_the_secret_is_accepted(
    client: httpx.AsyncClient, service_settings: Settings
) -> None:
    # Document 3 C's whole contract: HS256, the configured secret, `sub` the user id. No
    # iss or aud unless the operator configures them (exp is always required).
    now = int(time.time())
    token = jwt.encode(
        {"alg": "HS256"},
        {"sub": "1", "iat": now, "exp": now + 300, "role": "admin"},
        OctKey.import_key(service_settings.jwt_secret.get_secret_value().encode()),
    )
    response = await client.post(
        "/api/admin-action",
        json={"action": "interop"},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert response.status_code == 200, response.text
