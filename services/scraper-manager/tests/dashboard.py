"""Helpers of the dashboard's tests: a signed-in client as a browser holds one."""

from __future__ import annotations

import re

import httpx

from tests.factories import Client

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
