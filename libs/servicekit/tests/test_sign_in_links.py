"""One-time sign-in links (servicekit.web.pages.links) over a table of the test's own, as each
service binds its own: the states, the typed errors and their statuses, issue/check/redeem."""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
from servicekit.auth.api_keys import AccessLevel
from servicekit.auth.repository import ApiKeyRepository
from servicekit.db.engine import create_session_factory
from servicekit.db.models import utcnow
from servicekit.web.pages.links import (
    LinkExpired,
    LinkGone,
    LinkKeyRevoked,
    LinkState,
    LinkUnknown,
    OpenLink,
    SignInLinks,
    hash_token,
    link_state,
    link_url,
)
from sqlalchemy import Column, DateTime, text
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlmodel import Field, SQLModel
from sqlmodel.ext.asyncio.session import AsyncSession

NOW = datetime(2030, 1, 1, 12, tzinfo=UTC)
PATH = "/kit/link/"


class KitLink(SQLModel, table=True):
    __tablename__ = "kit_sign_in_links"

    token_hash: str = Field(primary_key=True, max_length=64)
    owner: str = Field(max_length=200)
    level: str = Field(max_length=16)
    expires_at: datetime = Field(sa_column=Column(DateTime(timezone=True), nullable=False))
    used_at: datetime | None = Field(
        default=None, sa_column=Column(DateTime(timezone=True), nullable=True)
    )
    api_key_id: uuid.UUID | None = None


class NotALinkTable(SQLModel, table=True):
    __tablename__ = "kit_not_links"

    token_hash: str = Field(primary_key=True)
    owner: str


@pytest.fixture
async def links_session(db_engine: AsyncEngine) -> AsyncIterator[AsyncSession]:
    async with db_engine.begin() as connection:
        await connection.run_sync(KitLink.__table__.create, checkfirst=True)  # type: ignore[attr-defined]
    async with create_session_factory(db_engine)() as session, session.begin():
        yield session


def kit_links(session: AsyncSession) -> SignInLinks[KitLink]:
    return SignInLinks(session, KitLink, path=PATH, noun="kit link")


def owner() -> str:
    return f"owner-{uuid.uuid4().hex[:8]}"


# -- decisions ------------------------------------------------------------------------------


def test_a_link_is_open_until_it_expires() -> None:
    link = KitLink(token_hash="h", owner="o", level="read", expires_at=NOW)
    assert link_state(link, NOW - timedelta(seconds=1)) is LinkState.OPEN
    assert link_state(link, NOW) is LinkState.EXPIRED


def test_a_used_link_says_used_even_after_its_expiry() -> None:
    link = KitLink(token_hash="h", owner="o", level="read", expires_at=NOW, used_at=NOW)
    assert link_state(link, NOW - timedelta(seconds=1)) is LinkState.USED
    assert link_state(link, NOW + timedelta(days=1)) is LinkState.USED


def test_the_stored_hash_is_the_tokens_sha256() -> None:
    assert hash_token("abc") == hashlib.sha256(b"abc").hexdigest()


def test_a_links_url_is_the_base_the_path_and_the_token() -> None:
    assert link_url("https://hub.example/", PATH, "tok") == "https://hub.example/kit/link/tok"


def test_used_and_expired_links_are_410_and_unknown_ones_404() -> None:
    assert (LinkGone.status_code, LinkExpired.status_code, LinkUnknown.status_code) == (
        410,
        410,
        404,
    )
    assert issubclass(LinkExpired, LinkGone)


def test_a_table_without_the_link_columns_is_refused_at_once() -> None:
    with pytest.raises(TypeError, match="level, expires_at, used_at, api_key_id"):
        SignInLinks(AsyncSession(), NotALinkTable, path=PATH)


# -- over the database ------------------------------------------------------------------------


async def test_only_the_hash_of_an_issued_token_is_stored(links_session: AsyncSession) -> None:
    who = owner()
    issued = await kit_links(links_session).issue(
        who,
        AccessLevel.WRITE,
        api_key_id=None,
        base_url="https://x.example",
        ttl=timedelta(hours=1),
        now=NOW,
    )
    assert issued.url == f"https://x.example{PATH}{issued.token}"
    assert issued.expires_at == NOW + timedelta(hours=1)
    connection = await links_session.connection()
    stored = (
        await connection.execute(
            text("SELECT token_hash, level FROM kit_sign_in_links WHERE owner = :o"), {"o": who}
        )
    ).one()
    assert tuple(stored) == (hash_token(issued.token), "write")


async def test_checking_an_open_link_tells_its_owner_and_level_and_spends_nothing(
    links_session: AsyncSession,
) -> None:
    links, who = kit_links(links_session), owner()
    issued = await links.issue(
        who, AccessLevel.READ, api_key_id=None, base_url="http://x", ttl=timedelta(1)
    )
    assert await links.check(issued.token) == OpenLink(who, AccessLevel.READ)
    assert await links.check(issued.token) == OpenLink(who, AccessLevel.READ)
    assert await links.redeem(issued.token) == OpenLink(who, AccessLevel.READ)


async def test_a_link_redeems_once_then_says_it_was_used(links_session: AsyncSession) -> None:
    links = kit_links(links_session)
    issued = await links.issue(
        owner(), AccessLevel.WRITE, api_key_id=None, base_url="http://x", ttl=timedelta(1)
    )
    await links.redeem(issued.token)
    with pytest.raises(LinkGone) as again:
        await links.redeem(issued.token)
    assert type(again.value) is LinkGone
    assert again.value.message.startswith("This kit link was already used")
    with pytest.raises(LinkGone):
        await links.check(issued.token)


async def test_an_expired_link_neither_checks_nor_redeems(links_session: AsyncSession) -> None:
    links = kit_links(links_session)
    issued = await links.issue(
        owner(),
        AccessLevel.READ,
        api_key_id=None,
        base_url="http://x",
        ttl=timedelta(minutes=15),
        now=NOW,
    )
    later = NOW + timedelta(minutes=15)
    with pytest.raises(LinkExpired, match="This kit link has expired"):
        await links.check(issued.token, later)
    with pytest.raises(LinkExpired):
        await links.redeem(issued.token, later)
    # Refusing it did not spend it: a minute before its expiry it still opens.
    assert await links.redeem(issued.token, later - timedelta(minutes=1))


async def test_an_unknown_or_overlong_token_is_not_a_link(links_session: AsyncSession) -> None:
    links = kit_links(links_session)
    for token in ("not-a-token", "x" * 5000):
        with pytest.raises(LinkUnknown, match="This kit link is not valid"):
            await links.check(token)
        with pytest.raises(LinkUnknown):
            await links.redeem(token)


async def test_two_simultaneous_redeems_sign_in_exactly_once(db_engine: AsyncEngine) -> None:
    async with db_engine.begin() as connection:
        await connection.run_sync(KitLink.__table__.create, checkfirst=True)  # type: ignore[attr-defined]
    factory = create_session_factory(db_engine)
    async with factory() as session, session.begin():
        issued = await kit_links(session).issue(
            owner(), AccessLevel.WRITE, api_key_id=None, base_url="http://x", ttl=timedelta(1)
        )

    async def click() -> OpenLink:
        async with factory() as session, session.begin():
            opened = await kit_links(session).redeem(issued.token)
            await asyncio.sleep(0.2)  # hold the row while the other click arrives
            return opened

    results = await asyncio.gather(click(), click(), return_exceptions=True)
    assert sorted(type(result).__name__ for result in results) == ["LinkGone", "OpenLink"]


async def test_a_fresh_link_is_created_now_plus_its_ttl(links_session: AsyncSession) -> None:
    before = utcnow()
    issued = await kit_links(links_session).issue(
        owner(), AccessLevel.READ, api_key_id=None, base_url="http://x", ttl=timedelta(minutes=5)
    )
    assert before + timedelta(minutes=5) <= issued.expires_at <= utcnow() + timedelta(minutes=5)


# -- links of a key -------------------------------------------------------------------------


async def new_key(session: AsyncSession, level: AccessLevel) -> uuid.UUID:
    record, _ = await ApiKeyRepository(session).create(prefix="kit", owner=owner(), level=level)
    return record.id


async def test_a_link_of_a_live_key_opens_a_session_standing_on_that_key(
    links_session: AsyncSession,
) -> None:
    key_id = await new_key(links_session, AccessLevel.WRITE)
    links, who = kit_links(links_session), owner()
    issued = await links.issue(
        who, AccessLevel.WRITE, api_key_id=key_id, base_url="http://x", ttl=timedelta(1)
    )
    assert await links.redeem(issued.token) == OpenLink(who, AccessLevel.WRITE, key_id)


async def test_a_link_of_a_key_revoked_afterwards_neither_checks_nor_redeems(
    links_session: AsyncSession,
) -> None:
    key_id = await new_key(links_session, AccessLevel.WRITE)
    links = kit_links(links_session)
    issued = await links.issue(
        owner(), AccessLevel.WRITE, api_key_id=key_id, base_url="http://x", ttl=timedelta(1)
    )
    keys = ApiKeyRepository(links_session)
    record = await keys.get_active(key_id)
    assert record is not None
    await keys.revoke(record)
    with pytest.raises(LinkKeyRevoked, match="This kit link no longer signs in") as refused:
        await links.check(issued.token)
    assert refused.value.status_code == 410
    with pytest.raises(LinkKeyRevoked):
        await links.redeem(issued.token)


async def test_a_link_of_a_key_given_another_level_since_does_not_redeem(
    links_session: AsyncSession,
) -> None:
    key_id = await new_key(links_session, AccessLevel.ADMIN)
    links = kit_links(links_session)
    issued = await links.issue(
        owner(), AccessLevel.ADMIN, api_key_id=key_id, base_url="http://x", ttl=timedelta(1)
    )
    keys = ApiKeyRepository(links_session)
    record = await keys.get_active(key_id)
    assert record is not None
    await keys.set_level(record, AccessLevel.READ)
    with pytest.raises(LinkKeyRevoked):
        await links.redeem(issued.token)
