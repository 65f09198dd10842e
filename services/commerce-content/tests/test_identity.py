"""A bearer JWT names its user in `sub` (spec, part C): a subject that cannot be a user id, or
names no user, makes the token invalid (401) wherever tokens are accepted, never a 500."""

from __future__ import annotations

import time

import httpx
import pytest
from commerce_content.identity.dependencies import jwt_codec, user_id_of
from commerce_content.settings import Settings
from joserfc import jwt
from joserfc.jwk import OctKey
from servicekit.auth.jwt import InvalidToken
from servicekit.web.params import MAX_DB_INT
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.factories import make_product, make_user
from tests.graphql_client import global_id

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
    client: httpx.AsyncClient, service_settings: Settings, db_engine: AsyncEngine
) -> None:
    # Document 3 C's whole contract: HS256, the configured secret, `sub` the user id. No
    # iss or aud unless the operator configures them (exp is always required).
    now = int(time.time())
    token = jwt.encode(
        {"alg": "HS256"},
        {
            "sub": str(await make_user(db_engine, "admin")),
            "iat": now,
            "exp": now + 300,
            "role": "admin",
        },
        OctKey.import_key(service_settings.jwt_secret.get_secret_value().encode()),
    )
    response = await client.post(
        "/api/admin-action",
        json={"action": "interop"},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert response.status_code == 200, response.text


# A user id no row has: past every id the tests' sequence will hand out.
NO_USER = str(MAX_DB_INT)

CREATE_ORDER = """
mutation($input: CreateOrderInput!) {
  createOrder(input: $input) { order { id } userErrors { code } }
}
"""


async def test_graphql_create_order_with_a_token_naming_no_user_is_401_and_stores_nothing(
    graphql_url: str, db_engine: AsyncEngine, service_settings: Settings
) -> None:
    """It was INTERNAL_SERVER_ERROR: the order's user_id broke orders_user_id_fkey."""
    product = await make_product(db_engine, price="5.00", name="Unowned")
    variables = {"input": {"items": [{"productId": global_id("Product", product), "quantity": 1}]}}
    async with httpx.AsyncClient() as http:
        response = await http.post(
            graphql_url,
            json={"query": CREATE_ORDER, "variables": variables},
            headers=bearer(service_settings, NO_USER),
        )
    assert response.status_code == 401, response.text
    assert response.json()["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"
    async with db_engine.connect() as conn:
        orders = await conn.scalar(
            text("SELECT count(*) FROM orders WHERE user_id = :u"), {"u": int(NO_USER)}
        )
    assert orders == 0


async def test_the_rest_apis_refuse_a_token_naming_no_user_as_they_refuse_a_bad_token(
    client: httpx.AsyncClient, service_settings: Settings
) -> None:
    headers = bearer(service_settings, NO_USER)
    article = await client.post("/api/v1/articles", json={"title": "Hello"}, headers=headers)
    content = await client.get("/api/products/", headers=headers)
    admin = await client.post("/api/admin-action", json={"action": "x"}, headers=headers)
    assert (article.status_code, article.json()["error"]["code"]) == (401, "unauthorized")
    assert (content.status_code, content.json()) == (401, {"error": "Invalid token"})
    assert (admin.status_code, admin.json()) == (401, {"error": "Unauthorized"})


async def test_a_token_of_a_user_deleted_since_is_refused(
    client: httpx.AsyncClient, service_settings: Settings, db_engine: AsyncEngine
) -> None:
    gone = await make_user(db_engine, "admin")
    headers = bearer(service_settings, str(gone))
    assert (await client.get("/api/v1/articles", headers=headers)).status_code == 200
    async with db_engine.begin() as conn:
        await conn.execute(text("DELETE FROM users WHERE id = :u"), {"u": gone})
    assert (await client.get("/api/v1/articles", headers=headers)).status_code == 401
