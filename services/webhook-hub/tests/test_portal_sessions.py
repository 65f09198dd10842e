"""Portal sessions live on the server (`portal_sessions`): signing out, revoking the key that
opened a session (or issued its link) and changing that key's level end it at its next
request; failed key sign-ins are limited per address."""

from __future__ import annotations

import uuid

import httpx
from servicekit.testing import HttpReceiver
from servicekit.testing.conformance import run_cli
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine
from webhook_hub.settings import Settings

from tests.factories import Consumer, csrf_in, make_consumer, signed_in, signed_in_as_new, subscribe
from tests.test_portal_links import new_link, open_link

SESSION_COOKIE = "webhook-hub-session"


async def key_id_of(client: httpx.AsyncClient, consumer: Consumer) -> str:
    me = await client.get("/webhooks/api-keys/me", headers=consumer.headers)
    assert me.status_code == 200, me.text
    return str(me.json()["key_id"])


async def queued_tests(engine: AsyncEngine, subscription_id: str) -> int:
    async with engine.connect() as connection:
        found = await connection.execute(
            text(
                "SELECT count(*) FROM deliveries WHERE subscription_id = :s"
                " AND event_type = 'webhook.test'"
            ),
            {"s": uuid.UUID(subscription_id)},
        )
        return int(found.scalar_one())


def sent_to_sign_in(response: httpx.Response) -> bool:
    return response.status_code == 303 and response.headers["location"].startswith(
        "/portal/login?next="
    )


async def test_after_signing_out_the_old_cookie_no_longer_opens_pages(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    _, token = await signed_in_as_new(client, db_engine)
    old_cookie = client.cookies[SESSION_COOKIE]
    assert (await client.post("/portal/logout", data={"csrf_token": token})).status_code == 303
    client.cookies.set(SESSION_COOKIE, old_cookie)  # kept by whoever copied it
    assert sent_to_sign_in(await client.get("/portal/endpoints"))


async def test_a_session_of_a_key_revoked_over_the_api_sends_no_test_event_and_signs_in_again(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    owner = f"consumer-{uuid.uuid4().hex[:8]}"
    admin = await make_consumer(db_engine, "admin", owner=owner)
    writer = await make_consumer(db_engine, "write", owner=owner)
    created = await subscribe(client, admin.headers, http_receiver.url)
    token = await signed_in(client, writer)
    first = await client.post(f"/portal/endpoints/{created['id']}/test", data={"csrf_token": token})
    assert first.headers["location"] == f"/portal/endpoints/{created['id']}"  # while it lives
    before = await queued_tests(db_engine, created["id"])
    revoked = await client.delete(
        f"/webhooks/api-keys/{await key_id_of(client, writer)}", headers=admin.headers
    )
    assert revoked.status_code == 204
    sent = await client.post(f"/portal/endpoints/{created['id']}/test", data={"csrf_token": token})
    assert sent_to_sign_in(sent)
    assert await queued_tests(db_engine, created["id"]) == before
    assert sent_to_sign_in(await client.get("/portal/endpoints"))


async def test_a_session_of_a_key_revoked_by_the_operators_command_ends(
    client: httpx.AsyncClient, db_engine: AsyncEngine, service_settings: Settings
) -> None:
    consumer = await make_consumer(db_engine, "write")
    key_id = await key_id_of(client, consumer)
    await signed_in(client, consumer)
    run_cli("webhook-hub", service_settings, "api-keys", "revoke", key_id)
    assert sent_to_sign_in(await client.get("/portal/endpoints"))


async def test_changing_the_keys_level_ends_its_sessions(
    client: httpx.AsyncClient, db_engine: AsyncEngine, service_settings: Settings
) -> None:
    consumer = await make_consumer(db_engine, "admin")
    key_id = await key_id_of(client, consumer)
    await signed_in(client, consumer)
    assert "Add an endpoint" in (await client.get("/portal/endpoints")).text
    run_cli("webhook-hub", service_settings, "api-keys", "set-level", key_id, "--level", "read")
    assert sent_to_sign_in(await client.get("/portal/endpoints"))
    await signed_in(client, consumer)  # the key, now read, opens a read session
    assert "Add an endpoint" not in (await client.get("/portal/endpoints")).text


async def test_a_link_issued_by_a_key_revoked_afterwards_does_not_sign_in(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    owner = f"consumer-{uuid.uuid4().hex[:8]}"
    admin = await make_consumer(db_engine, "admin", owner=owner)
    issuer = await make_consumer(db_engine, "write", owner=owner)
    path = await new_link(client, issuer.headers)
    revoked = await client.delete(
        f"/webhooks/api-keys/{await key_id_of(client, issuer)}", headers=admin.headers
    )
    assert revoked.status_code == 204
    landing = await client.get(path)
    assert landing.status_code == 410
    assert "no longer signs in" in landing.text
    token = csrf_in((await client.get("/portal/login")).text)
    opened = await client.post(path, data={"csrf_token": token})
    assert opened.status_code == 410
    assert SESSION_COOKIE not in client.cookies


async def test_a_session_opened_by_a_link_ends_with_the_key_that_issued_it(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    owner = f"consumer-{uuid.uuid4().hex[:8]}"
    admin = await make_consumer(db_engine, "admin", owner=owner)
    issuer = await make_consumer(db_engine, "write", owner=owner)
    assert (await open_link(client, await new_link(client, issuer.headers))).status_code == 303
    assert (await client.get("/portal/endpoints")).status_code == 200
    await client.delete(
        f"/webhooks/api-keys/{await key_id_of(client, issuer)}", headers=admin.headers
    )
    assert sent_to_sign_in(await client.get("/portal/endpoints"))


async def test_an_address_is_answered_429_after_ten_failed_sign_ins(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    consumer = await make_consumer(db_engine, "write")
    token = csrf_in((await client.get("/portal/login")).text)
    for _ in range(10):
        wrong = await client.post(
            "/portal/login", data={"api_key": "whk_wrong", "next": "", "csrf_token": token}
        )
        assert wrong.status_code == 401
    refused = await client.post(
        "/portal/login", data={"api_key": consumer.key, "next": "", "csrf_token": token}
    )
    assert refused.status_code == 429
    assert 1 <= int(refused.headers["retry-after"]) <= 60
    assert "Too many failed sign-ins" in refused.text
    assert SESSION_COOKIE not in client.cookies


async def test_the_session_row_keeps_the_key_it_stands_on_and_the_service(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    consumer = await make_consumer(db_engine, "read")
    key_id = await key_id_of(client, consumer)
    await signed_in(client, consumer)
    async with db_engine.connect() as connection:
        row = (
            await connection.execute(
                text("SELECT service, level, api_key_id FROM portal_sessions WHERE owner = :o"),
                {"o": consumer.owner},
            )
        ).one()
    assert (row[0], row[1], str(row[2])) == ("webhook-hub", "read", key_id)
