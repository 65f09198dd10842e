"""Portal access over HTTP: `POST /webhooks/portal-links`, the operators' `portal-link`
command, one-time links (used twice or expired: a page saying so), and API-key sign-in."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import httpx
from servicekit.auth.api_keys import AccessLevel
from servicekit.testing.conformance import run_cli
from servicekit.web.pages.links import hash_token
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine
from webhook_hub.portal.service import portal_level
from webhook_hub.settings import Settings

from tests.factories import csrf_in, make_consumer, signed_in

LINK = re.compile(r"https?://[^/]+(/portal/link/[A-Za-z0-9_-]+)$")


async def open_link(client: httpx.AsyncClient, path: str) -> httpx.Response:
    landing = await client.get(path)
    assert landing.status_code == 200, landing.text
    return await client.post(path, data={"csrf_token": csrf_in(landing.text)})


async def new_link(client: httpx.AsyncClient, headers: dict[str, str], **body: int) -> str:
    response = await client.post("/webhooks/portal-links", json=body, headers=headers)
    assert response.status_code == 201, response.text
    found = LINK.match(response.json()["url"])
    assert found, response.json()
    return found.group(1)


# -- decisions ------------------------------------------------------------------------------


def test_an_operator_keys_link_opens_an_admin_session_at_most() -> None:
    assert portal_level(AccessLevel.OPERATOR) is AccessLevel.ADMIN
    assert portal_level(AccessLevel.READ) is AccessLevel.READ


# -- the API ----------------------------------------------------------------------------------


async def test_a_read_key_gets_a_link_valid_for_an_hour_by_default(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    consumer = await make_consumer(db_engine, "read")
    before = datetime.now(UTC)
    response = await client.post("/webhooks/portal-links", json={}, headers=consumer.headers)
    assert response.status_code == 201
    expires = datetime.fromisoformat(response.json()["expires_at"])
    assert timedelta(minutes=59) < expires - before <= timedelta(minutes=61)


async def test_a_link_longer_than_a_day_is_refused(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    consumer = await make_consumer(db_engine, "write")
    response = await client.post(
        "/webhooks/portal-links", json={"ttl_seconds": 86401}, headers=consumer.headers
    )
    assert response.status_code == 422
    assert "ttl_seconds" in response.text


async def test_a_link_needs_a_key(client: httpx.AsyncClient) -> None:
    response = await client.post("/webhooks/portal-links", json={})
    assert response.status_code == 401


async def test_only_the_tokens_hash_is_stored(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    consumer = await make_consumer(db_engine, "write")
    path = await new_link(client, consumer.headers)
    token = path.rsplit("/", 1)[1]
    async with db_engine.connect() as connection:
        stored = (
            await connection.execute(
                text("SELECT token_hash, owner, level FROM portal_links WHERE owner = :o"),
                {"o": consumer.owner},
            )
        ).one()
    assert tuple(stored) == (hash_token(token), consumer.owner, "write")
    assert token not in stored[0]


# -- opening a link --------------------------------------------------------------------------


async def test_a_link_opens_a_session_for_its_owner_at_its_level(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    consumer = await make_consumer(db_engine, "read")
    path = await new_link(client, consumer.headers)
    opened = await open_link(client, path)
    assert opened.status_code == 303
    assert opened.headers["location"] == "/portal/endpoints"
    page = await client.get("/portal/endpoints")
    assert page.status_code == 200
    assert consumer.owner in page.text
    assert "Add an endpoint" not in page.text  # read level: no write controls


async def test_merely_fetching_a_link_does_not_spend_it(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    consumer = await make_consumer(db_engine, "write")
    path = await new_link(client, consumer.headers)
    for _ in range(3):  # link previews, mail scanners
        assert (await client.get(path)).status_code == 200
    assert (await open_link(client, path)).status_code == 303


async def test_a_used_link_shows_a_410_page_and_opens_nothing(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    consumer = await make_consumer(db_engine, "write")
    path = await new_link(client, consumer.headers)
    landing = await client.get(path)
    token = csrf_in(landing.text)
    assert (await client.post(path, data={"csrf_token": token})).status_code == 303
    client.cookies.delete("webhook-hub-session")
    again = await client.post(path, data={"csrf_token": token})
    assert again.status_code == 410
    assert "already used" in again.text
    assert "webhook-hub-session" not in again.headers.get("set-cookie", "")
    shown = await client.get(path)
    assert shown.status_code == 410
    assert "text/html" in shown.headers["content-type"]


async def test_an_expired_link_shows_a_410_page_saying_so(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    consumer = await make_consumer(db_engine, "write")
    path = await new_link(client, consumer.headers)
    async with db_engine.begin() as connection:
        await connection.execute(
            text("UPDATE portal_links SET expires_at = now() - interval '1 s' WHERE owner = :o"),
            {"o": consumer.owner},
        )
    response = await client.get(path)
    assert response.status_code == 410
    assert "expired" in response.text


async def test_an_unknown_link_is_a_404_page(client: httpx.AsyncClient) -> None:
    response = await client.get("/portal/link/not-a-real-token")
    assert response.status_code == 404
    assert "not valid" in response.text


# -- the CLI and sign-in -----------------------------------------------------------------------


async def test_the_portal_link_command_prints_a_link_that_opens_a_write_session(
    client: httpx.AsyncClient, service_settings: Settings
) -> None:
    result = run_cli(
        "webhook-hub", service_settings, "portal-link", "--owner", "cli-owner", "--level", "write"
    )
    found = LINK.match(result.stdout.strip().splitlines()[-1])
    assert found, result.stdout
    assert (await open_link(client, found.group(1))).status_code == 303
    page = await client.get("/portal/endpoints")
    assert "cli-owner" in page.text
    assert "Add an endpoint" in page.text


async def test_signing_in_with_an_api_key_opens_a_session_at_its_level(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    consumer = await make_consumer(db_engine, "write")
    await signed_in(client, consumer)
    page = await client.get("/portal/endpoints")
    assert consumer.owner in page.text


async def test_a_wrong_api_key_is_told_at_the_field(client: httpx.AsyncClient) -> None:
    form = await client.get("/portal/login")
    response = await client.post(
        "/portal/login",
        data={"api_key": "whk_nope", "next": "", "csrf_token": csrf_in(form.text)},
    )
    assert response.status_code == 401
    assert "This API key is not valid." in response.text
    assert 'aria-invalid="true"' in response.text


async def test_a_portal_post_without_the_csrf_token_is_refused(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    consumer = await make_consumer(db_engine, "write")
    path = await new_link(client, consumer.headers)
    response = await client.post(path, data={})
    assert response.status_code == 403
    assert (await client.get(path)).status_code == 200  # the link is not spent
