"""Pages over HTTP: CSRF, page sessions and their cookies, expiry, error pages, CSP. The
sample app keeps its sessions in `kit_page_sessions` (tests/migrations 0003)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import httpx
import pytest
from pydantic import SecretStr
from servicekit.auth.api_keys import AccessLevel
from servicekit.settings import Environment, ServiceSettings
from servicekit.testing.app import serve_app
from servicekit.web.pages import CSRF_HEADER, PageSession, PageSettings, SessionState
from servicekit.web.pages.page_session import SessionCookie, session_state
from servicekit.web.pages.security import PAGE_CSP

from tests.pages_app import build_pages_app


class Clock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def page_settings(kit: ServiceSettings, **changes: object) -> PageSettings:
    return PageSettings(
        database_url=kit.database_url,
        nats_url=kit.nats_url,
        log_json=False,
        session_idle_minutes=30,
        session_max_hours=12,
    ).model_copy(update=changes)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def browser_like(
    clock: Clock, kit_settings: ServiceSettings
) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client keeping cookies as a browser does, on the sample app and its database."""
    async with serve_app(build_pages_app(page_settings(kit_settings), clock)) as client:
        yield client


def token_in(html: str) -> str:
    found = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert found, "no CSRF field in the form"
    return found.group(1)


async def sign_in(client: httpx.AsyncClient, owner: str = "acme", level: str = "write") -> None:
    form = await client.get("/pages/login")
    response = await client.post(
        "/pages/login",
        data={"owner": owner, "level": level, "csrf_token": token_in(form.text)},
    )
    assert response.status_code == 303


# -- CSRF ---------------------------------------------------------------------------------


async def test_a_post_without_the_csrf_token_is_refused_with_403(
    browser_like: httpx.AsyncClient,
) -> None:
    await sign_in(browser_like)
    response = await browser_like.post("/pages/things", data={"name": "kettle"})
    assert response.status_code == 403
    assert "text/html" in response.headers["content-type"]
    assert "expired or was not sent from this site" in response.text


async def test_a_post_with_a_token_of_another_nonce_is_refused(
    browser_like: httpx.AsyncClient,
) -> None:
    await sign_in(browser_like)
    other = httpx.AsyncClient(transport=browser_like._transport, base_url="http://testserver")
    foreign_token = token_in((await other.get("/pages/login")).text)
    response = await browser_like.post(
        "/pages/things", data={"name": "kettle", "csrf_token": foreign_token}
    )
    assert response.status_code == 403


async def test_a_form_post_with_the_token_goes_through(browser_like: httpx.AsyncClient) -> None:
    await sign_in(browser_like)
    token = token_in((await browser_like.get("/pages/things")).text)
    response = await browser_like.post(
        "/pages/things", data={"name": "kettle", "csrf_token": token}
    )
    assert response.status_code == 303
    page = await browser_like.get("/pages/things")
    assert "kettle" in page.text
    assert "Created “kettle”." in page.text


async def test_an_htmx_request_sends_the_token_in_its_header(
    browser_like: httpx.AsyncClient,
) -> None:
    await sign_in(browser_like)
    page = await browser_like.get("/pages/things")
    token = token_in(page.text)
    assert f'hx-headers=\'{{"{CSRF_HEADER}": "{token}"}}\'' in page.text
    await browser_like.post("/pages/things", data={"name": "kettle", "csrf_token": token})
    refused = await browser_like.post("/pages/things/1/toggle", headers={"HX-Request": "true"})
    assert refused.status_code == 403
    toggled = await browser_like.post(
        "/pages/things/1/toggle", headers={"HX-Request": "true", CSRF_HEADER: token}
    )
    assert toggled.status_code == 200
    assert "paused" in toggled.text


async def test_a_post_from_another_origin_is_refused_even_with_the_token(
    browser_like: httpx.AsyncClient,
) -> None:
    await sign_in(browser_like)
    token = token_in((await browser_like.get("/pages/things")).text)
    response = await browser_like.post(
        "/pages/things",
        data={"name": "kettle", "csrf_token": token},
        headers={"Origin": "https://evil.example"},
    )
    assert response.status_code == 403


# -- sessions and their cookies -------------------------------------------------------------


async def test_the_session_cookie_is_httponly_and_samesite_lax_and_not_secure_in_development(
    browser_like: httpx.AsyncClient,
) -> None:
    form = await browser_like.get("/pages/login")
    response = await browser_like.post(
        "/pages/login", data={"owner": "acme", "level": "read", "csrf_token": token_in(form.text)}
    )
    cookie = next(
        c for c in response.headers.get_list("set-cookie") if c.startswith("service-session=")
    )
    attributes = {part.strip().lower() for part in cookie.split(";")[1:]}
    assert {"httponly", "samesite=lax", "path=/"} <= attributes
    assert "secure" not in attributes


async def test_in_production_the_cookies_are_secure_and_host_prefixed(
    kit_settings: ServiceSettings,
) -> None:
    settings = page_settings(
        kit_settings,
        env=Environment.PRODUCTION,
        session_secret=SecretStr("a-real-secret-from-the-vault-123"),
    )
    app = build_pages_app(settings)
    async with serve_app(app, base_url="https://testserver") as client:
        form = await client.get("/pages/login")
        csrf_cookie = form.headers["set-cookie"]
        assert csrf_cookie.startswith("__Host-service-csrf=")
        assert "Secure" in csrf_cookie
        assert "SameSite=strict" in csrf_cookie
        response = await client.post(
            "/pages/login",
            data={"owner": "acme", "level": "read", "csrf_token": token_in(form.text)},
        )
    cookie = response.headers["set-cookie"]
    assert cookie.startswith("__Host-service-session=")
    assert {"Secure", "HttpOnly", "SameSite=lax"} <= {p.strip() for p in cookie.split(";")}


@pytest.mark.parametrize("secret", [None, "", "change-me"])
def test_production_refuses_a_default_or_empty_session_secret(secret: str | None) -> None:
    changes = {} if secret is None else {"session_secret": secret}
    # pydantic wraps the InsecureSettingsError the validator raises.
    with pytest.raises(ValueError, match="session_secret has a development default"):
        PageSettings(env=Environment.PRODUCTION, **changes)  # type: ignore[arg-type]


async def test_a_page_without_a_session_redirects_to_login_and_back(
    browser_like: httpx.AsyncClient,
) -> None:
    response = await browser_like.get("/pages/things?cursor=3")
    assert response.status_code == 303
    assert response.headers["location"] == "/pages/login?next=/pages/things%3Fcursor%3D3"


async def test_a_session_holds_when_the_server_shares_one_state_dict_between_requests(
    clock: Clock, kit_settings: ServiceSettings
) -> None:
    """asgi-lifespan (the services' test client) hands every request the same `state` dict: a
    session read cached there would answer the next request too."""
    async with serve_app(build_pages_app(page_settings(kit_settings), clock)) as client:
        assert (await client.get("/pages/things")).status_code == 303  # no session yet
        await sign_in(client, owner="shared-state")
        page = await client.get("/pages/things")
        assert page.status_code == 200
        assert "shared-state" in page.text


async def test_an_htmx_request_without_a_session_is_told_to_load_the_login_page(
    browser_like: httpx.AsyncClient,
) -> None:
    response = await browser_like.get("/pages/things", headers={"HX-Request": "true"})
    assert response.status_code == 204
    assert response.headers["hx-redirect"].startswith("/pages/login?next=")


async def test_a_session_idle_longer_than_the_limit_redirects_to_login(
    browser_like: httpx.AsyncClient, clock: Clock
) -> None:
    await sign_in(browser_like)
    clock.now += 30 * 60 + 1
    response = await browser_like.get("/pages/things")
    assert response.status_code == 303
    assert response.headers["location"].startswith("/pages/login")


async def test_activity_keeps_a_session_alive_until_its_absolute_limit(
    browser_like: httpx.AsyncClient, clock: Clock
) -> None:
    await sign_in(browser_like)
    for _ in range(23):  # every 29 minutes for 11 h 7 min: never idle
        clock.now += 29 * 60
        assert (await browser_like.get("/pages/things")).status_code == 200
    clock.now += 29 * 60 + 60 * 60  # past 12 h since sign-in
    assert (await browser_like.get("/pages/things")).status_code == 303


async def test_a_tampered_session_cookie_is_no_session(browser_like: httpx.AsyncClient) -> None:
    await sign_in(browser_like, owner="acme")
    assert (await browser_like.get("/pages/things")).status_code == 200
    value = browser_like.cookies["service-session"]
    payload, _, signature = value.rpartition(".")
    forged = SessionCookie(SecretStr("guessed"), "service").encode("a-token-of-our-own")
    for cookie in (f"{payload}.{signature[::-1]}", forged, "garbage"):
        browser_like.cookies.clear()
        browser_like.cookies.set("service-session", cookie)
        assert (await browser_like.get("/pages/things")).status_code == 303


async def test_sign_out_ends_the_session(browser_like: httpx.AsyncClient) -> None:
    await sign_in(browser_like)
    token = token_in((await browser_like.get("/pages/things")).text)
    await browser_like.post("/pages/logout", data={"csrf_token": token})
    assert (await browser_like.get("/pages/things")).status_code == 303


@pytest.mark.parametrize(
    "next_path", ["https://evil.example/pages/", "//evil.example/pages/", "/docs", ""]
)
async def test_sign_in_never_sends_the_browser_elsewhere(
    browser_like: httpx.AsyncClient, next_path: str
) -> None:
    form = await browser_like.get("/pages/login")
    response = await browser_like.post(
        "/pages/login",
        data={"owner": "a", "level": "read", "next": next_path, "csrf_token": token_in(form.text)},
    )
    assert response.headers["location"] == "/pages/"


# -- pages, errors and headers ------------------------------------------------------------


async def test_pages_carry_the_strict_csp_and_are_never_cached(
    browser_like: httpx.AsyncClient,
) -> None:
    response = await browser_like.get("/pages/login")
    assert response.headers["content-security-policy"] == PAGE_CSP
    assert response.headers["cache-control"] == "no-store"
    assert response.headers["x-content-type-options"] == "nosniff"
    assert "<script>" not in response.text
    assert " style=" not in response.text


async def test_a_missing_page_is_an_html_page_while_the_api_keeps_its_json(
    browser_like: httpx.AsyncClient,
) -> None:
    page = await browser_like.get("/pages/nowhere")
    assert page.status_code == 404
    assert "<h1" in page.text
    api = await browser_like.get("/nowhere")
    assert api.status_code == 404
    assert api.json()["code"] == "not_found"


async def test_a_field_error_is_shown_at_the_field(browser_like: httpx.AsyncClient) -> None:
    await sign_in(browser_like)
    token = token_in((await browser_like.get("/pages/things")).text)
    response = await browser_like.post("/pages/things", data={"name": " ", "csrf_token": token})
    assert response.status_code == 422
    assert 'aria-invalid="true" aria-describedby="f-name-hint f-name-error"' in response.text
    assert "Give the thing a name." in response.text


# -- decisions ------------------------------------------------------------------------------


def session_at(issued: float, seen: float) -> PageSession:
    return PageSession("acme", AccessLevel.READ, "sid", issued, seen)


@pytest.mark.parametrize(
    ("issued", "seen", "state"),
    [
        (0, 0, SessionState.VALID),
        (0, -1800, SessionState.IDLE),
        (-43200, 0, SessionState.EXPIRED),
        (-43199, -1799, SessionState.VALID),
    ],
)
def test_session_state_follows_the_idle_and_absolute_limits(
    issued: float, seen: float, state: SessionState
) -> None:
    session = session_at(issued, seen)
    assert session_state(session, 0, idle_seconds=1800, max_seconds=43200) is state


def test_a_session_cookie_signed_with_another_secret_does_not_decode() -> None:
    encoded = SessionCookie(SecretStr("one"), "service").encode("token")
    assert SessionCookie(SecretStr("one"), "service").decode(encoded) == "token"
    assert SessionCookie(SecretStr("two"), "service").decode(encoded) is None
