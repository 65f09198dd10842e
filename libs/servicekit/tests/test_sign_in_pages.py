"""The sign-in pages every service includes (servicekit.web.pages.sign_in) and the module-level
page routers beside them (`page_router`), over an app of the test's own: what a service sets
(its sentences, where a link lands, the level its sessions get) is what the pages do."""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from fastapi.responses import HTMLResponse
from servicekit.auth.api_keys import AccessLevel
from servicekit.auth.repository import ApiKeyRepository
from servicekit.settings import ServiceSettings
from servicekit.testing.app import serve_app
from servicekit.web.app import create_service_app
from servicekit.web.errors import render_flat_error
from servicekit.web.pages import Pages, PageSessionDep, PageSettings, page_router
from servicekit.web.pages.links import SignInLinks
from servicekit.web.pages.sign_in import SignInPages, sign_in_router
from servicekit.web_session import SessionDep
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlmodel.ext.asyncio.session import AsyncSession

from tests.pages_app import KitPageSession
from tests.test_sign_in_links import KitLink

SIGN_IN = SignInPages(
    template="sign_in.html",
    refused="No kit key of that name.",
    destination="the kit rooms",
    landing="/kit/home",
    signed_out="Signed out of the kit.",
)

home = page_router()


def read_sessions(level: AccessLevel) -> AccessLevel:
    """The kit's pages only read, whatever the key may do."""
    return AccessLevel.READ


@home.get("/home")
async def home_page(session: PageSessionDep) -> HTMLResponse:
    return HTMLResponse(f"{session.owner} at {session.level.value}")


@home.post("/echo")
async def echo() -> HTMLResponse:
    return HTMLResponse("posted")


async def kit_links(db: SessionDep) -> SignInLinks[KitLink]:
    return SignInLinks(db, KitLink, path="/kit/link/", noun="kit link", level_of=read_sessions)


def build_app(settings: PageSettings) -> FastAPI:
    app = create_service_app(
        settings,
        title="Kit sign-in",
        description="servicekit sign-in pages test app",
        version="0.0.1",
        render_error=render_flat_error,
    )
    Pages(
        app,
        settings,
        prefix="/kit",
        site_name="Kit",
        login_path="/kit/login",
        sessions=KitPageSession,
        session_level=read_sessions,
        logout_path="/kit/logout",
        template_dirs=[Path(__file__).parent / "templates"],
    )
    app.include_router(sign_in_router(SIGN_IN, kit_links), prefix="/kit")
    app.include_router(home, prefix="/kit")
    return app


@pytest.fixture
async def client(
    kit_settings: ServiceSettings, db_engine: AsyncEngine
) -> AsyncIterator[httpx.AsyncClient]:
    async with db_engine.begin() as connection:
        await connection.run_sync(KitLink.__table__.create, checkfirst=True)  # type: ignore[attr-defined]
    settings = PageSettings(
        database_url=kit_settings.database_url, nats_url=kit_settings.nats_url, log_json=False
    )
    async with serve_app(build_app(settings)) as client:
        yield client


def token_in(html: str) -> str:
    found = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert found, "no CSRF field in the page"
    return found.group(1)


async def new_key(session: AsyncSession, owner: str) -> tuple[uuid.UUID, str]:
    record, plaintext = await ApiKeyRepository(session).create(
        prefix="kit", owner=owner, level=AccessLevel.WRITE
    )
    await session.commit()
    return record.id, plaintext


async def test_a_key_signs_in_at_the_level_the_pages_give_it_and_goes_on_to_next(
    client: httpx.AsyncClient, committing_session: AsyncSession
) -> None:
    _, key = await new_key(committing_session, "kit-owner")
    token = token_in((await client.get("/kit/login")).text)
    answer = await client.post(
        "/kit/login", data={"api_key": key, "next": "/kit/home", "csrf_token": token}
    )
    assert (answer.status_code, answer.headers["location"]) == (303, "/kit/home")
    assert (await client.get("/kit/home")).text == "kit-owner at read"


async def test_a_key_that_does_not_sign_in_is_refused_in_the_services_words(
    client: httpx.AsyncClient,
) -> None:
    token = token_in((await client.get("/kit/login")).text)
    answer = await client.post("/kit/login", data={"api_key": "kit_wrong", "csrf_token": token})
    assert answer.status_code == 401
    assert "No kit key of that name." in answer.text


async def test_signing_out_ends_the_session_and_says_so_in_the_services_words(
    client: httpx.AsyncClient, committing_session: AsyncSession
) -> None:
    _, key = await new_key(committing_session, "leaving-owner")
    token = token_in((await client.get("/kit/login")).text)
    await client.post("/kit/login", data={"api_key": key, "csrf_token": token})
    answer = await client.post("/kit/logout", data={"csrf_token": token})
    assert (answer.status_code, answer.headers["location"]) == (303, "/kit/login")
    assert "Signed out of the kit." in (await client.get("/kit/login")).text
    assert (await client.get("/kit/home")).status_code == 303


async def test_a_link_names_its_destination_and_opens_a_session_where_the_service_lands(
    client: httpx.AsyncClient, committing_session: AsyncSession
) -> None:
    key_id, _ = await new_key(committing_session, "linked-owner")
    issued = await SignInLinks(committing_session, KitLink, path="/kit/link/").issue(
        "linked-owner", AccessLevel.READ, base_url="", ttl=timedelta(hours=1), api_key_id=key_id
    )
    await committing_session.commit()
    landing = await client.get(f"/kit/link/{issued.token}")
    assert "Open the kit rooms" in landing.text
    opened = await client.post(
        f"/kit/link/{issued.token}", data={"csrf_token": token_in(landing.text)}
    )
    assert (opened.status_code, opened.headers["location"]) == (303, "/kit/home")
    assert (await client.get("/kit/home")).text == "linked-owner at read"


async def test_a_module_level_page_router_refuses_a_post_without_the_csrf_token(
    client: httpx.AsyncClient,
) -> None:
    token = token_in((await client.get("/kit/login")).text)
    assert (await client.post("/kit/echo")).status_code == 403
    assert (await client.post("/kit/echo", data={"csrf_token": token})).text == "posted"
