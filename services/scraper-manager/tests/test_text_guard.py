"""The probes of issue 13 (M1) against scraper-manager: text PostgreSQL cannot store is a 422 in
the envelope (the generic cases are in the conformance tests)."""

from __future__ import annotations

import httpx


async def test_a_nul_in_a_scraper_name_is_422_and_creates_nothing(
    client: httpx.AsyncClient, admin_key_headers: dict[str, str]
) -> None:
    response = await client.post(
        "/api/v1/scrapers",
        content=b'{"name": "a\\u0000b", "url": "https://example.com/"}',
        headers={**admin_key_headers, "Content-Type": "application/json"},
    )
    assert response.status_code == 422
    assert "NUL" in response.json()["error"]
    listed = await client.get("/api/v1/scrapers", headers=admin_key_headers)
    assert listed.json()["data"] == []


async def test_json_nested_20000_deep_is_422(
    client: httpx.AsyncClient, admin_key_headers: dict[str, str]
) -> None:
    response = await client.post(
        "/api/v1/scrapers",
        content=b'{"name": ' + b"[" * 20_000 + b"]" * 20_000 + b"}",
        headers={**admin_key_headers, "Content-Type": "application/json"},
    )
    assert response.status_code == 422
    assert "nested" in response.json()["error"]
