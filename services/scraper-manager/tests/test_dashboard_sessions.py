"""Dashboard sessions live on the server (`dashboard_sessions`): signing out, revoking the key
that opened a session (or issued its link) and changing that key's level end it at its next
request; a session of another service (webhook-hub's portal) opens nothing here, even with a
shared SESSION_SECRET; failed key sign-ins are limited per address."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import httpx
from scraper_manager.models import DashboardSession
from scraper_manager.settings import Settings
from servicekit.auth.page_sessions import SessionCookie, hash_token, new_token
from servicekit.db.engine import create_session_factory
from servicekit.testing.conformance import run_cli
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.dashboard import DASH, sign_in, token_in
from tests.factories import Client, make_client
from tests.test_dashboard import new_link, open_link

SESSION_COOKIE = "scraper-manager-session"


async def key_id_of(client: httpx.AsyncClient, who: Client) -> str:
    me = await client.get("/api/v1/api-keys/me", headers=who.headers)
    assert me.status_code == 200, me.text
    return str(me.json()["key_id"])


def sent_to_sign_in(response: httpx.Response) -> bool:
    return response.status_code == 303 and response.headers["location"].startswith(
        f"{DASH}/login?next="
    )


def scraper_form(token: str, name: str) -> dict[str, str]:
    return {
        "csrf_token": token,
        "name": name,
        "url": "http://127.0.0.1:9/",
        "schedule": "",
        "timezone": "UTC",
    }


async def test_after_signing_out_the_old_cookie_no_longer_opens_pages(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    token = await sign_in(client, await make_client(db_engine, "write"))
    old_cookie = client.cookies[SESSION_COOKIE]
    assert (await client.post(f"{DASH}/logout", data={"csrf_token": token})).status_code == 303
    client.cookies.set(SESSION_COOKIE, old_cookie)  # kept by whoever copied it
    assert sent_to_sign_in(await client.get(f"{DASH}/"))


async def test_a_session_of_a_key_revoked_over_the_api_creates_no_scraper_and_signs_in_again(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    owner = f"client-{uuid.uuid4().hex[:8]}"
    admin = await make_client(db_engine, "admin", owner=owner)
    writer = await make_client(db_engine, "write", owner=owner)
    writer_key = await key_id_of(client, writer)
    token = await sign_in(client, writer)
    before = await client.post(f"{DASH}/scrapers/new", data=scraper_form(token, "before"))
    assert before.status_code == 303  # the form creates a scraper while the key lives
    revoked = await client.delete(f"/api/v1/api-keys/{writer_key}", headers=admin.headers)
    assert revoked.status_code == 204
    answer = await client.post(f"{DASH}/scrapers/new", data=scraper_form(token, "after"))
    assert sent_to_sign_in(answer)
    listed = await client.get("/api/v1/scrapers", headers=admin.headers)
    assert [s["name"] for s in listed.json()["data"]] == ["before"]


async def test_changing_the_keys_level_ends_its_sessions(
    client: httpx.AsyncClient, db_engine: AsyncEngine, service_settings: Settings
) -> None:
    who = await make_client(db_engine, "write")
    key_id = await key_id_of(client, who)
    token = await sign_in(client, who)
    before = await client.post(f"{DASH}/scrapers/new", data=scraper_form(token, "before"))
    assert before.status_code == 303
    run_cli("scraper-manager", service_settings, "api-keys", "set-level", key_id, "--level", "read")
    answer = await client.post(f"{DASH}/scrapers/new", data=scraper_form(token, "after"))
    assert sent_to_sign_in(answer)
    listed = await client.get("/api/v1/scrapers", headers=who.headers)
    assert [s["name"] for s in listed.json()["data"]] == ["before"]


async def test_a_link_issued_by_a_key_revoked_afterwards_does_not_sign_in(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    owner = f"client-{uuid.uuid4().hex[:8]}"
    admin = await make_client(db_engine, "admin", owner=owner)
    issuer = await make_client(db_engine, "write", owner=owner)
    issuer_key = await key_id_of(client, issuer)
    path = await new_link(client, issuer)
    assert (
        await client.delete(f"/api/v1/api-keys/{issuer_key}", headers=admin.headers)
    ).status_code == 204
    landing = await client.get(path)
    assert landing.status_code == 410
    assert "no longer signs in" in landing.text
    token = token_in((await client.get(f"{DASH}/login")).text)
    assert (await client.post(path, data={"csrf_token": token})).status_code == 410
    assert SESSION_COOKIE not in client.cookies


async def test_a_session_opened_by_a_link_ends_with_the_key_that_issued_it(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    owner = f"client-{uuid.uuid4().hex[:8]}"
    admin = await make_client(db_engine, "admin", owner=owner)
    issuer = await make_client(db_engine, "write", owner=owner)
    issuer_key = await key_id_of(client, issuer)
    assert (await open_link(client, await new_link(client, issuer))).status_code == 303
    assert (await client.get(f"{DASH}/")).status_code == 200
    await client.delete(f"/api/v1/api-keys/{issuer_key}", headers=admin.headers)
    assert sent_to_sign_in(await client.get(f"{DASH}/"))


async def test_a_portal_session_cookie_opens_nothing_here_even_with_a_shared_secret(
    client: httpx.AsyncClient, db_engine: AsyncEngine, service_settings: Settings
) -> None:
    """The portal's cookie, made as webhook-hub makes it with the same SESSION_SECRET (the
    dev default is shared), and its row put in this database as if both shared one."""
    who = await make_client(db_engine, "admin")
    portal_token = new_token()
    now = datetime.now(UTC)
    async with create_session_factory(db_engine)() as db, db.begin():
        db.add(
            DashboardSession(
                id_hash=hash_token(portal_token),
                service="webhook-hub",
                owner=who.owner,
                level="admin",
                created_at=now,
                last_seen_at=now,
                expires_at=now + timedelta(hours=1),
            )
        )
    secret = service_settings.session_secret
    portal_cookie = SessionCookie(secret, "webhook-hub").encode(portal_token)
    client.cookies.set(SESSION_COOKIE, portal_cookie)
    assert sent_to_sign_in(await client.get(f"{DASH}/"))
    # Even signed for this service (a leaked secret), the row says it is the portal's.
    client.cookies.set(
        SESSION_COOKIE, SessionCookie(secret, "scraper-manager").encode(portal_token)
    )
    assert sent_to_sign_in(await client.get(f"{DASH}/"))


async def test_an_address_is_answered_429_after_ten_failed_sign_ins(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "write")
    token = token_in((await client.get(f"{DASH}/login")).text)
    for _ in range(10):
        wrong = await client.post(
            f"{DASH}/login", data={"api_key": "smk_wrong", "csrf_token": token}
        )
        assert wrong.status_code == 401
    key = who.headers["Authorization"].removeprefix("Bearer ")
    refused = await client.post(f"{DASH}/login", data={"api_key": key, "csrf_token": token})
    assert refused.status_code == 429
    assert 1 <= int(refused.headers["retry-after"]) <= 60
    assert "Too many failed sign-ins" in refused.text
    assert SESSION_COOKIE not in client.cookies
