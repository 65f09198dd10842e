"""Page sessions on the server (servicekit.auth.page_sessions) through the sample pages app:
the cookie names a row; signing out deletes it; the key it stands on ends it by being revoked
or given another level; a cookie of another service opens nothing; failed key sign-ins are
limited per address; the clean-up deletes expired rows. The rules, unit-tested, first."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import ClassVar

import httpx
import pytest
from pydantic import SecretStr
from servicekit.auth.api_keys import AccessLevel
from servicekit.auth.page_sessions import (
    KeyStanding,
    PageSession,
    SessionCookie,
    SessionState,
    delete_expired_sessions,
    hash_token,
    key_state,
    session_verdict,
)
from servicekit.auth.repository import ApiKeyRepository
from servicekit.db.engine import create_session_factory
from servicekit.settings import ServiceSettings
from servicekit.testing.app import serve_app
from servicekit.web.pages import PageSettings
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.pages_app import KitPageSession, build_pages_app
from tests.test_pages import sign_in, token_in

KEY_ID = uuid.UUID(int=1)


def session(level: AccessLevel = AccessLevel.WRITE, key: uuid.UUID | None = KEY_ID) -> PageSession:
    return PageSession("acme", level, "hash", 0.0, 0.0, key)


# -- decisions ------------------------------------------------------------------------------


def test_a_session_on_a_live_key_at_its_level_holds() -> None:
    assert key_state(AccessLevel.WRITE, KEY_ID, KeyStanding("write", False)) is SessionState.VALID


def test_a_revoked_or_missing_key_ends_its_sessions() -> None:
    revoked = KeyStanding("write", True)
    assert key_state(AccessLevel.WRITE, KEY_ID, revoked) is SessionState.KEY_REVOKED
    assert key_state(AccessLevel.WRITE, KEY_ID, None) is SessionState.KEY_REVOKED


@pytest.mark.parametrize("now_level", ["read", "admin", "no-such-level"])
def test_a_key_given_another_level_up_or_down_ends_its_sessions(now_level: str) -> None:
    standing = KeyStanding(now_level, False)
    assert key_state(AccessLevel.WRITE, KEY_ID, standing) is SessionState.LEVEL_CHANGED


def test_the_level_is_compared_as_the_service_maps_it() -> None:
    def admin_at_most(level: AccessLevel) -> AccessLevel:
        return AccessLevel.ADMIN if level is AccessLevel.OPERATOR else level

    standing = KeyStanding("operator", False)
    held = key_state(AccessLevel.ADMIN, KEY_ID, standing, level_of=admin_at_most)
    assert held is SessionState.VALID


def test_a_session_without_a_key_follows_no_key() -> None:
    assert key_state(AccessLevel.ADMIN, None, None) is SessionState.VALID


def test_time_limits_are_decided_before_the_key() -> None:
    verdict = session_verdict(
        session(), KeyStanding("write", True), 1801.0, idle_seconds=1800, max_seconds=43200
    )
    assert verdict is SessionState.IDLE


def test_a_cookie_signed_for_another_service_does_not_decode_even_with_the_same_secret() -> None:
    secret = SecretStr("shared")
    value = SessionCookie(secret, "webhook-hub").encode("token")
    assert SessionCookie(secret, "webhook-hub").decode(value) == "token"
    assert SessionCookie(secret, "scraper-manager").decode(value) is None


@pytest.mark.parametrize("value", ["", "garbage", "a.b", "x" * 5000, "\udcff"])
def test_any_cookie_value_decodes_to_a_token_or_none(value: str) -> None:
    assert SessionCookie(SecretStr("s"), "svc").decode(value) is None


# -- over HTTP, on the database ---------------------------------------------------------------


class OtherServiceSettings(PageSettings):
    service_name: ClassVar[str] = "other-service"


def settings_of(kit: ServiceSettings, kind: type[PageSettings] = PageSettings) -> PageSettings:
    return kind(database_url=kit.database_url, nats_url=kit.nats_url, log_json=False)


@pytest.fixture
async def client(kit_settings: ServiceSettings) -> AsyncIterator[httpx.AsyncClient]:
    async with serve_app(build_pages_app(settings_of(kit_settings))) as http:
        yield http


async def new_key(engine: AsyncEngine, level: str = "write") -> tuple[uuid.UUID, str]:
    async with create_session_factory(engine)() as db, db.begin():
        record, plaintext = await ApiKeyRepository(db).create(
            prefix="kit", owner=f"owner-{uuid.uuid4().hex[:8]}", level=AccessLevel(level)
        )
    return record.id, plaintext


async def key_sign_in(client: httpx.AsyncClient, key: str) -> httpx.Response:
    form = await client.get("/pages/login")
    return await client.post(
        "/pages/key-login", data={"api_key": key, "csrf_token": token_in(form.text)}
    )


async def rows_of(engine: AsyncEngine, id_hash: str) -> list[tuple[str, str, str]]:
    async with engine.connect() as connection:
        result = await connection.execute(
            text("SELECT service, owner, level FROM kit_page_sessions WHERE id_hash = :h"),
            {"h": id_hash},
        )
        return [(str(r[0]), str(r[1]), str(r[2])) for r in result]


def token_of(client: httpx.AsyncClient, service: str = "service") -> str:
    token = SessionCookie(SecretStr(settings_secret()), service).decode(
        client.cookies[f"{service}-session"]
    )
    assert token is not None
    return token


def settings_secret() -> str:
    return PageSettings().session_secret.get_secret_value()


async def test_the_server_keeps_only_the_tokens_hash(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    await sign_in(client, owner="hash-owner", level="read")
    token = token_of(client)
    assert await rows_of(db_engine, hash_token(token)) == [("service", "hash-owner", "read")]
    async with db_engine.connect() as connection:
        found = await connection.execute(
            text("SELECT count(*) FROM kit_page_sessions WHERE id_hash = :t"), {"t": token}
        )
        assert found.scalar_one() == 0


async def test_after_signing_out_the_old_cookie_opens_nothing(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    await sign_in(client)
    old_cookie = client.cookies["service-session"]
    csrf = token_in((await client.get("/pages/things")).text)
    await client.post("/pages/logout", data={"csrf_token": csrf})
    assert await rows_of(db_engine, hash_token(token_of_value(old_cookie))) == []
    client.cookies.set("service-session", old_cookie)  # replayed, as an attacker would
    assert (await client.get("/pages/things")).status_code == 303


def token_of_value(value: str) -> str:
    token = SessionCookie(SecretStr(settings_secret()), "service").decode(value)
    assert token is not None
    return token


async def test_revoking_the_key_ends_the_sessions_it_opened(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    key_id, key = await new_key(db_engine)
    assert (await key_sign_in(client, key)).status_code == 303
    assert (await client.get("/pages/things")).status_code == 200
    async with create_session_factory(db_engine)() as db, db.begin():
        keys = ApiKeyRepository(db)
        record = await keys.get_active(key_id)
        assert record is not None
        await keys.revoke(record)
    response = await client.get("/pages/things")
    assert response.status_code == 303
    assert response.headers["location"].startswith("/pages/login")


async def test_changing_the_keys_level_ends_the_sessions_it_opened(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    key_id, key = await new_key(db_engine, "write")
    await key_sign_in(client, key)
    async with create_session_factory(db_engine)() as db, db.begin():
        keys = ApiKeyRepository(db)
        record = await keys.get_active(key_id)
        assert record is not None
        await keys.set_level(record, AccessLevel.ADMIN)  # even upwards: sign in again
    assert (await client.get("/pages/things")).status_code == 303


async def test_a_cookie_of_another_service_sharing_the_secret_and_table_opens_nothing(
    kit_settings: ServiceSettings, db_engine: AsyncEngine
) -> None:
    other_app = build_pages_app(settings_of(kit_settings, OtherServiceSettings))
    async with (
        serve_app(build_pages_app(settings_of(kit_settings))) as service,
        serve_app(other_app) as other,
    ):
        await sign_in(service, owner="cross-owner")
        assert (await service.get("/pages/things")).status_code == 200
        # The cookie as it is, under the other service's name: its signature is not the
        # other service's.
        other.cookies.set("other-service-session", service.cookies["service-session"])
        assert (await other.get("/pages/things")).status_code == 303
        # Re-signed for the other service (a leaked secret): the row is not the other's.
        token = token_of(service)
        forged = SessionCookie(SecretStr(settings_secret()), "other-service").encode(token)
        other.cookies.set("other-service-session", forged)
        assert (await other.get("/pages/things")).status_code == 303
        assert (await service.get("/pages/things")).status_code == 200


async def test_an_address_is_answered_429_after_ten_failed_sign_ins(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    _, key = await new_key(db_engine)
    for _ in range(10):
        assert (await key_sign_in(client, "kit_wrong")).status_code == 303  # to the form
    refused = await key_sign_in(client, key)  # even the right key: not looked at
    assert refused.status_code == 429
    assert 1 <= int(refused.headers["retry-after"]) <= 60
    assert "Too many failed sign-ins" in refused.text


async def test_a_successful_sign_in_is_never_counted(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    _, key = await new_key(db_engine)
    for _ in range(12):
        assert (await key_sign_in(client, key)).status_code == 303
        assert (await client.get("/pages/things")).status_code == 200


async def test_the_clean_up_deletes_expired_sessions_and_keeps_live_ones(
    db_engine: AsyncEngine,
) -> None:
    now = datetime.now(UTC)
    expired, live = f"expired-{uuid.uuid4().hex}", f"live-{uuid.uuid4().hex}"
    async with create_session_factory(db_engine)() as db, db.begin():
        for id_hash, expires in (
            (expired, now - timedelta(seconds=1)),
            (live, now + timedelta(hours=1)),
        ):
            db.add(
                KitPageSession(
                    id_hash=id_hash,
                    service="service",
                    owner="o",
                    level="read",
                    created_at=now - timedelta(hours=2),
                    last_seen_at=now - timedelta(hours=1),
                    expires_at=expires,
                )
            )
    deleted = await delete_expired_sessions(create_session_factory(db_engine), KitPageSession, now)
    assert deleted >= 1
    async with db_engine.connect() as connection:
        left = await connection.execute(
            text("SELECT id_hash FROM kit_page_sessions WHERE id_hash IN (:a, :b)"),
            {"a": expired, "b": live},
        )
        assert [r[0] for r in left] == [live]
