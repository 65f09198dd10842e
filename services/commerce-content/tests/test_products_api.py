"""`GET /api/v1/products`: the catalogue in the resource API's conventions."""

from __future__ import annotations

import httpx
from commerce_content.settings import Settings
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.factories import bearer_for, make_product, make_user, make_variant


async def user(engine: AsyncEngine, settings: Settings, role: str = "user") -> dict[str, str]:
    return bearer_for(settings, await make_user(engine, role), role)


async def test_listing_needs_a_token(client: httpx.AsyncClient) -> None:
    response = await client.get("/api/v1/products")
    assert response.status_code == 401
    assert response.json()["error"]["code"]


async def test_listing_pages_by_id_with_variants_on_request(
    client: httpx.AsyncClient, db_engine: AsyncEngine, service_settings: Settings
) -> None:
    headers = await user(db_engine, service_settings)
    first = await make_product(db_engine, price="10.00", sale_price="8.00")
    await make_variant(db_engine, first, stock=0)
    second = await make_product(db_engine)
    response = await client.get(
        "/api/v1/products",
        params={"after_id": first - 1, "limit": 1, "include": "variants"},
        headers=headers,
    )
    assert response.status_code == 200
    body = response.json()
    assert [p["id"] for p in body["data"]] == [first]
    assert body["data"][0]["pricing"] == {
        "base_price": "10.00",
        "sale_price": "8.00",
        "currency": "USD",
    }
    assert [(v["price"], v["in_stock"]) for v in body["data"][0]["variants"]] == [("8.00", False)]
    assert body["meta"] == {"limit": 1, "next_after_id": first}
    following = await client.get(
        "/api/v1/products", params={"after_id": first, "limit": 1}, headers=headers
    )
    assert [p["id"] for p in following.json()["data"]] == [second]
    assert "variants" not in following.json()["data"][0]


async def test_drafts_are_listed_for_managers_only(
    client: httpx.AsyncClient, db_engine: AsyncEngine, service_settings: Settings
) -> None:
    draft = await make_product(db_engine, published=False)
    params = {"after_id": draft - 1, "limit": 1}
    shopper = await client.get(
        "/api/v1/products", params=params, headers=await user(db_engine, service_settings)
    )
    assert draft not in [p["id"] for p in shopper.json()["data"]]
    manager = await client.get(
        "/api/v1/products",
        params=params,
        headers=await user(db_engine, service_settings, "manager"),
    )
    assert [p["id"] for p in manager.json()["data"]] == [draft]


async def test_unknown_includes_and_limits_are_400(
    client: httpx.AsyncClient, db_engine: AsyncEngine, service_settings: Settings
) -> None:
    headers = await user(db_engine, service_settings)
    bad_include = await client.get(
        "/api/v1/products", params={"include": "secrets"}, headers=headers
    )
    too_many = await client.get("/api/v1/products", params={"limit": 101}, headers=headers)
    assert [bad_include.status_code, too_many.status_code] == [400, 400]
    assert "allowed: variants" in bad_include.json()["error"]["message"]
