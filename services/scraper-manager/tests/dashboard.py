"""Helpers of the dashboard's tests: a signed-in client as a browser holds one."""

from __future__ import annotations

import re

import httpx
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
