"""The product content API (part C): parameters, bounds, auth, CORS, content-saved webhook."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from commerce_content.app import create_app
from commerce_content.settings import Settings
from servicekit.testing import HttpReceiver, serve_app
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine
from standardwebhooks import Webhook

from tests.factories import bearer_for, make_user

PARENT = 7001  # a catalog of this module's own, so other tests' products do not show


@pytest.fixture(scope="module")
def catalog_settings(service_settings: Settings) -> Settings:
    return service_settings.model_copy(
        update={
            "catalog_parent_id": PARENT,
            "frontend_url": "https://shop.example",
            "frontend_origin": "https://shop.example",
        }
    )


@pytest.fixture(scope="module", autouse=True)
async def catalog(db_engine: AsyncEngine) -> list[int]:
    ids = []
    async with db_engine.begin() as conn:
        await conn.execute(text("DELETE FROM products WHERE parent_id = :p"), {"p": PARENT})
        for n in range(25):
            ids.append(
                await conn.scalar(
                    text(
                        "INSERT INTO products (name, slug, description, base_price, sale_price,"
                        " currency, stock, image, tags, parent_id, menu_index, published, deleted,"
                        " created_at, updated_at) VALUES (:name, :slug, 'desc', 10.50, NULL, 'USD',"
                        " 5, '/img.png', '{}', :parent, :menu, :published, :deleted, now(), now())"
                        " RETURNING id"
                    ),
                    {
                        "name": f"Cup {n:02d}" if n % 2 else f"Plate {n:02d}",
                        "slug": f"c7001-{n}",
                        "parent": PARENT,
                        "menu": 100 - n,
                        "published": n != 3,
                        "deleted": n == 4,
                    },
                )
            )
    return ids


@pytest.fixture
async def content(catalog_settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    async with serve_app(create_app(catalog_settings)) as http:
        yield http


def key(settings: Settings) -> dict[str, str]:
    return {"X-API-Key": settings.content_api_key.get_secret_value()}


async def test_list_returns_published_children_in_menu_order(
    content: httpx.AsyncClient, catalog_settings: Settings, catalog: list[int]
) -> None:
    response = await content.get("/api/products/", headers=key(catalog_settings))
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json; charset=utf-8"
    assert response.headers["cache-control"] == "no-store"
    body = response.json()
    assert (body["total"], body["limit"], body["offset"]) == (23, 20, 0)
    ids = [item["id"] for item in body["items"]]
    assert ids == [i for n, i in reversed(list(enumerate(catalog))) if n not in (3, 4)][:20]
    item = body["items"][0]
    assert set(item) == {"id", "title", "slug", "description", "price", "image", "url"}
    assert item["price"] == 10.5
    assert item["url"] == f"https://shop.example/products/{item['slug']}"


@pytest.mark.parametrize(
    ("query", "limit", "offset", "count"),
    [
        ("limit=5&offset=20", 5, 20, 3),
        ("limit=1000", 100, 0, 23),
        ("limit=abc&offset=xyz", 20, 0, 20),
        ("limit=0&offset=-4", 20, 0, 20),
        ("action=whatever&limit=2", 2, 0, 2),
    ],
)
async def test_limit_and_offset_bounds(
    content: httpx.AsyncClient,
    catalog_settings: Settings,
    query: str,
    limit: int,
    offset: int,
    count: int,
) -> None:
    body = (await content.get(f"/api/products/?{query}", headers=key(catalog_settings))).json()
    assert (body["limit"], body["offset"], len(body["items"])) == (limit, offset, count)


async def test_search_matches_the_title_and_returns_the_short_items(
    content: httpx.AsyncClient, catalog_settings: Settings
) -> None:
    body = (await content.get("/api/products/?search=cup", headers=key(catalog_settings))).json()
    assert body["total"] == 11  # twelve odd-numbered cups, one of them unpublished
    assert all(set(item) == {"id", "title", "price"} for item in body["items"])
    assert all(item["title"].startswith("Cup") for item in body["items"])


async def test_get_returns_one_item_or_404(
    content: httpx.AsyncClient, catalog_settings: Settings, catalog: list[int]
) -> None:
    found = await content.get(
        f"/api/products/?action=get&id={catalog[0]}", headers=key(catalog_settings)
    )
    assert found.json()["item"]["id"] == catalog[0]
    for hidden in (catalog[3], catalog[4], 999_999, "abc"):
        missing = await content.get(
            f"/api/products/?action=get&id={hidden}", headers=key(catalog_settings)
        )
        assert missing.status_code == 404
        assert missing.json() == {"error": "Not found"}


async def test_a_wrong_or_missing_key_is_401_unauthorized(content: httpx.AsyncClient) -> None:
    for headers in ({}, {"X-API-Key": "wrong"}):
        response = await content.get("/api/products/", headers=headers)
        assert response.status_code == 401
        assert response.json() == {"error": "Unauthorized"}


async def test_a_valid_jwt_is_accepted_and_a_bad_one_is_invalid_token(
    content: httpx.AsyncClient, catalog_settings: Settings, db_engine: AsyncEngine
) -> None:
    user = await make_user(db_engine, "user")
    ok = await content.get("/api/products/", headers=bearer_for(catalog_settings, user, "user"))
    assert ok.status_code == 200
    bad = await content.get("/api/products/", headers={"Authorization": "Bearer x.y.z"})
    assert bad.status_code == 401
    assert bad.json() == {"error": "Invalid token"}


async def test_a_key_in_the_query_string_is_refused(
    content: httpx.AsyncClient, catalog_settings: Settings
) -> None:
    secret = catalog_settings.content_api_key.get_secret_value()
    response = await content.get(f"/api/products/?api_key={secret}")
    assert response.status_code == 400
    assert "query string" in response.json()["error"]


async def test_preflight_is_204_with_the_listed_headers(content: httpx.AsyncClient) -> None:
    response = await content.options(
        "/api/products/",
        headers={"Origin": "https://shop.example", "Access-Control-Request-Method": "GET"},
    )
    assert response.status_code == 204
    assert response.headers["access-control-allow-methods"] == "GET, POST, PUT, DELETE, OPTIONS"
    assert (
        response.headers["access-control-allow-headers"] == "Content-Type, Authorization, X-API-Key"
    )
    assert response.headers["access-control-max-age"] == "86400"
    assert response.headers["access-control-allow-origin"] == "https://shop.example"


async def test_only_the_configured_origin_is_allowed(
    content: httpx.AsyncClient, catalog_settings: Settings
) -> None:
    other = await content.options(
        "/api/products/",
        headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "GET"},
    )
    assert "access-control-allow-origin" not in other.headers
    ours = await content.get(
        "/api/products/", headers={**key(catalog_settings), "Origin": "https://shop.example"}
    )
    assert ours.headers["access-control-allow-origin"] == "https://shop.example"
    outside = await content.get("/healthz", headers={"Origin": "https://shop.example"})
    assert "access-control-allow-origin" not in outside.headers


async def saved(
    http: httpx.AsyncClient, headers: dict[str, str], method: str, path: str, body: dict[str, Any]
) -> httpx.Response:
    return await http.request(method, path, json=body, headers=headers)


async def test_saving_content_posts_a_signed_notification_within_3_seconds(
    catalog_settings: Settings, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    settings = catalog_settings.model_copy(
        update={"content_webhook_url": f"{http_receiver.url}/hook"}
    )
    manager = await make_user(db_engine, "manager")
    headers = bearer_for(settings, manager, "manager")
    async with serve_app(create_app(settings)) as http:
        created = await saved(
            http,
            headers,
            "POST",
            "/api/content/products",
            {"name": "Teapot", "slug": "teapot-c7001", "base_price": "30.00", "published": True},
        )
        assert created.status_code == 201
        item_id = created.json()["id"]
        updated = await saved(
            http, headers, "PATCH", f"/api/content/products/{item_id}", {"published": False}
        )
        assert updated.status_code == 200
        received = await http_receiver.wait_for(2, timeout=3.0)
    secret = settings.content_webhook_secret.get_secret_value()
    bodies = [Webhook(secret).verify(r.body, r.headers) for r in received]
    assert bodies == [
        {"event": "created", "id": item_id, "alias": "teapot-c7001", "published": True},
        {"event": "updated", "id": item_id, "alias": "teapot-c7001", "published": False},
    ]
    assert all(r.headers["content-type"] == "application/json" for r in received)
    async with db_engine.connect() as conn:
        types = (
            (
                await conn.execute(
                    text(
                        "SELECT type FROM outbox_events WHERE (data->>'id')::int = :id AND type LIKE 'content.%' ORDER BY seq"
                    ),
                    {"id": item_id},
                )
            )
            .scalars()
            .all()
        )
    assert types == ["content.created", "content.updated"]


async def test_nothing_is_sent_when_no_address_is_configured(
    content: httpx.AsyncClient,
    catalog_settings: Settings,
    db_engine: AsyncEngine,
    http_receiver: HttpReceiver,
) -> None:
    manager = await make_user(db_engine, "manager")
    response = await saved(
        content,
        bearer_for(catalog_settings, manager, "manager"),
        "POST",
        "/api/content/products",
        {"name": "Bowl", "slug": "bowl-c7001", "base_price": "8.00"},
    )
    assert response.status_code == 201
    await asyncio.sleep(0.5)
    assert http_receiver.requests == []


async def test_a_failing_receiver_never_fails_the_save(
    catalog_settings: Settings, db_engine: AsyncEngine
) -> None:
    settings = catalog_settings.model_copy(
        update={"content_webhook_url": "http://127.0.0.1:9/hook"}
    )
    manager = await make_user(db_engine, "manager")
    async with serve_app(create_app(settings)) as http:
        response = await saved(
            http,
            bearer_for(settings, manager, "manager"),
            "POST",
            "/api/content/products",
            {"name": "Jug", "slug": "jug-c7001", "base_price": "12.00"},
        )
    assert response.status_code == 201


async def test_content_admin_needs_a_manager(
    content: httpx.AsyncClient, catalog_settings: Settings, db_engine: AsyncEngine
) -> None:
    user = await make_user(db_engine, "user")
    response = await saved(
        content,
        bearer_for(catalog_settings, user, "user"),
        "POST",
        "/api/content/products",
        {"name": "X", "slug": "x-c7001", "base_price": "1.00"},
    )
    assert response.status_code == 403


NEW_ITEM = {"name": "Bounded", "slug": "bounded-c7001", "base_price": "1.00"}
OUT_OF_RANGE = [2**31, 2**64, -(2**31) - 1]


@pytest.fixture
async def manager_headers(catalog_settings: Settings, db_engine: AsyncEngine) -> dict[str, str]:
    return bearer_for(catalog_settings, await make_user(db_engine, "manager"), "manager")


async def test_a_null_base_price_is_400(
    content: httpx.AsyncClient, manager_headers: dict[str, str]
) -> None:
    body = {**NEW_ITEM, "base_price": None}
    response = await content.post("/api/content/products", json=body, headers=manager_headers)
    assert response.status_code == 400
    assert "base_price" in response.json()["error"]
    item = (
        await content.post("/api/content/products", json=NEW_ITEM, headers=manager_headers)
    ).json()
    patched = await content.patch(
        f"/api/content/products/{item['id']}", json={"base_price": None}, headers=manager_headers
    )
    assert patched.status_code == 400
    assert "base_price" in patched.json()["error"]


async def test_a_null_sale_price_clears_it(
    content: httpx.AsyncClient, manager_headers: dict[str, str], db_engine: AsyncEngine
) -> None:
    body = {**NEW_ITEM, "slug": "on-sale-c7001", "sale_price": "0.50"}
    item = (await content.post("/api/content/products", json=body, headers=manager_headers)).json()
    patched = await content.patch(
        f"/api/content/products/{item['id']}", json={"sale_price": None}, headers=manager_headers
    )
    assert patched.status_code == 200
    async with db_engine.connect() as conn:
        sale = await conn.scalar(
            text("SELECT sale_price FROM products WHERE id = :id"), {"id": item["id"]}
        )
    assert sale is None


@pytest.mark.parametrize("field", ["menu_index", "stock"])
@pytest.mark.parametrize("value", OUT_OF_RANGE)
async def test_integers_beyond_the_database_range_are_400_not_500(
    content: httpx.AsyncClient, manager_headers: dict[str, str], field: str, value: int
) -> None:
    created = await content.post(
        "/api/content/products", json={**NEW_ITEM, field: value}, headers=manager_headers
    )
    assert created.status_code == 400, created.text
    assert field in created.json()["error"]
    patched = await content.patch(
        "/api/content/products/1", json={field: value}, headers=manager_headers
    )
    assert patched.status_code == 400, patched.text


@pytest.mark.parametrize("tags", [b'["a\\ud800"]', b'["' + b"x" * 101 + b'"]'])
async def test_a_tag_the_column_cannot_hold_is_400_not_500(
    content: httpx.AsyncClient, manager_headers: dict[str, str], tags: bytes
) -> None:
    body = b'{"name": "T", "slug": "tags-c7001", "base_price": "1.00", "tags": ' + tags + b"}"
    response = await content.post(
        "/api/content/products",
        content=body,
        headers={**manager_headers, "content-type": "application/json"},
    )
    assert response.status_code == 400, response.text
