"""Who a request is counted against (issue 13, M2): anonymous and invalid callers by client
address, valid callers by who they are (the API key's owner or the token's subject), never by
the text of the Authorization header."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from commerce_content.app import create_app
from commerce_content.rate_limit.limiter import client_address, subject_key
from commerce_content.settings import Settings
from servicekit.testing import serve_app
from servicekit.testing.conformance import create_key
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.factories import bearer_for, make_user

ARTICLES = "/api/v1/articles"
LIMIT = 3


@pytest.fixture
async def limited_client(service_settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    settings = service_settings.model_copy(update={"rate_limit": f"{LIMIT}/minute"})
    async with serve_app(create_app(settings)) as http:
        yield http


async def statuses(client: httpx.AsyncClient, authorizations: list[str]) -> list[int]:
    return [
        (await client.get(ARTICLES, headers={"Authorization": value})).status_code
        for value in authorizations
    ]


async def test_the_same_bogus_header_is_limited_by_address(
    limited_client: httpx.AsyncClient,
) -> None:
    answered = await statuses(limited_client, ["Bearer bogus"] * (LIMIT + 2))
    assert answered == [401] * LIMIT + [429, 429]


async def test_different_bogus_headers_share_the_address_limit(
    limited_client: httpx.AsyncClient,
) -> None:
    answered = await statuses(limited_client, [f"Bearer bogus-{n}" for n in range(LIMIT + 2)])
    assert answered == [401] * LIMIT + [429, 429]


async def test_a_valid_key_recased_is_still_one_caller(
    limited_client: httpx.AsyncClient, service_settings: Settings
) -> None:
    key = create_key("commerce-content", service_settings, "read")
    schemes = ["Bearer", "bEARER", "BEARER", "bearer", "BeArEr"]
    answered = await statuses(limited_client, [f"{scheme} {key}" for scheme in schemes])
    assert answered == [200] * LIMIT + [429, 429]


async def test_two_keys_of_one_owner_share_its_limit(
    limited_client: httpx.AsyncClient, service_settings: Settings
) -> None:
    keys = [
        create_key("commerce-content", service_settings, "read", owner="one-owner-two-keys")
        for _ in range(2)
    ]
    answered = await statuses(limited_client, [f"Bearer {keys[n % 2]}" for n in range(LIMIT + 1)])
    assert answered == [200] * LIMIT + [429]


async def test_a_valid_caller_does_not_use_up_the_anonymous_budget_of_its_address(
    limited_client: httpx.AsyncClient, service_settings: Settings, db_engine: AsyncEngine
) -> None:
    user = await make_user(db_engine, "user")
    token = bearer_for(service_settings, user, "user")["Authorization"]
    assert await statuses(limited_client, [token] * LIMIT) == [200] * LIMIT
    assert await statuses(limited_client, ["Bearer bogus"]) == [401]


def test_subjects_of_keys_and_tokens_never_collide() -> None:
    assert subject_key("api_key", "42") != subject_key("jwt", "42")


def test_an_unknown_client_address_is_one_bucket() -> None:
    assert client_address(None) == client_address(None)
