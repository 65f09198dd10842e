"""Helpers of the dashboard's tests: a signed-in client as a browser holds one, and the
dashboard in a real Chromium (`DashboardInBrowser`, the `dashboard` fixture)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import httpx
from playwright.async_api import Page
from servicekit.testing.browser import BrowserPage
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.factories import Client, make_client

DASH = "/dashboard"


def token_in(html: str) -> str:
    found = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert found is not None, "no CSRF field on the page"
    return found.group(1)


async def sign_in(client: httpx.AsyncClient, who: Client) -> str:
    """Signs `who` in with their key (cookies replace any earlier session); the CSRF token."""
    client.cookies.clear()
    form = await client.get(f"{DASH}/login")
    key = who.headers["Authorization"].removeprefix("Bearer ")
    answer = await client.post(
        f"{DASH}/login", data={"api_key": key, "csrf_token": token_in(form.text)}
    )
    assert answer.status_code == 303, answer.text
    home = await client.get(f"{DASH}/")
    assert home.status_code == 200
    return token_in(home.text)


async def signed_in_as_new(
    client: httpx.AsyncClient, engine: AsyncEngine, level: str
) -> tuple[Client, str]:
    """A new client of `level`, signed in on `client`: it and the CSRF token."""
    who = await make_client(engine, level)
    return who, await sign_in(client, who)


async def new_scraper_form(
    client: httpx.AsyncClient, token: str, fields: dict[str, str]
) -> httpx.Response:
    """The dashboard's "New scraper" form sent with `fields`."""
    return await client.post(f"{DASH}/scrapers/new", data={"csrf_token": token, **fields})


async def open_link(watched: BrowserPage, server: str, who: Client) -> None:
    """`who` signed in on `watched` through a dashboard link, on the dashboard's home."""
    async with httpx.AsyncClient(base_url=server) as api:
        link = await api.post("/api/v1/dashboard-links", headers=who.headers)
    await watched.page.goto(link.json()["url"])
    await watched.page.get_by_role("button", name="Continue to the dashboard").click()
    await watched.page.wait_for_url(f"{server}/dashboard/")


@dataclass
class DashboardInBrowser:
    """The dashboard in a real Chromium (`watched`) against `scraper-manager serve` and
    `worker` as processes (at `url`), over the tests' database (`engine`)."""

    watched: BrowserPage
    url: str
    engine: AsyncEngine
    screenshot_dir: Path

    @property
    def page(self) -> Page:
        return self.watched.page

    async def open(self, who: Client) -> None:
        """Signed in as `who` through a dashboard link, on the dashboard's home."""
        await open_link(self.watched, self.url, who)

    async def signed_in(self, level: str) -> Client:
        """A new client of `level`, signed in through a dashboard link."""
        who = await make_client(self.engine, level)
        await self.open(who)
        return who
