"""Idempotent checkout: `Idempotency-Key` on `POST /api/orders/checkout` and on GraphQL's
`createOrder` returns the first answer to a retry, refuses the key with another body, and
lets concurrent requests with one key create one order."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from commerce_content.app import create_app
from commerce_content.errors import InvalidRequest
from commerce_content.orders.idempotency import (
    REST_SURFACE,
    fingerprint,
    parse_key,
    prune_expired_keys,
)
from commerce_content.settings import Settings
from servicekit.testing import run_http_server
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.factories import bearer_for, make_product, make_user
from tests.graphql_client import ask, global_id

CHECKOUT = "/api/orders/checkout"
CREATE_ORDER = """
mutation($input: CreateOrderInput!) {
  createOrder(input: $input) { order { id paymentUrl } userErrors { field message code } }
}
"""


def cart(product_id: int, quantity: int = 1, email: str = "ada@example.com") -> dict[str, Any]:
    return {
        "items": [{"productId": str(product_id), "quantity": quantity}],
        "customerEmail": email,
    }


def keyed(key: str, headers: dict[str, str] | None = None) -> dict[str, str]:
    return {"Idempotency-Key": key, **(headers or {})}


async def orders_of(engine: AsyncEngine, email: str) -> int:
    async with engine.connect() as conn:
        count = await conn.scalar(
            text("SELECT count(*) FROM orders WHERE customer_email = :e"), {"e": email}
        )
    return int(count or 0)


async def stock_of(engine: AsyncEngine, product_id: int) -> int:
    async with engine.connect() as conn:
        stock = await conn.scalar(
            text("SELECT stock FROM products WHERE id = :id"), {"id": product_id}
        )
    return int(stock)


def unique_email() -> str:
    return f"buyer-{uuid.uuid4().hex[:10]}@example.com"


async def product_email_key(engine: AsyncEngine, **product: Any) -> tuple[int, str, str]:
    """A new product, an email no other test uses and a new idempotency key."""
    return await make_product(engine, **product), unique_email(), str(uuid.uuid4())


async def buyer_product_email(
    engine: AsyncEngine, settings: Settings, **product: Any
) -> tuple[int, str, dict[str, str]]:
    """A new product, an email no other test uses, and a new user's credentials with a new
    idempotency key."""
    user = bearer_for(settings, await make_user(engine), "user")
    return await make_product(engine, **product), unique_email(), keyed(str(uuid.uuid4()), user)


@pytest.fixture
async def http(service_settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """The app behind a real uvicorn server: concurrent requests really are concurrent."""
    app = create_app(service_settings)
    async with (
        run_http_server(app) as base_url,
        httpx.AsyncClient(base_url=base_url, timeout=60) as client,
    ):
        yield client


# Decisions: pure functions.


def test_a_key_is_one_to_255_visible_ascii_characters() -> None:
    assert parse_key(None) is None
    assert (
        parse_key("9f1c6a0e-3b1d-4c8e-a7f2-1d2e3f4a5b6c") == "9f1c6a0e-3b1d-4c8e-a7f2-1d2e3f4a5b6c"
    )
    for bad in ["", "a b", "k\u00e9y", "x" * 256, "tab\tkey"]:
        with pytest.raises(InvalidRequest):
            parse_key(bad)


def test_the_fingerprint_ignores_key_order_but_not_values_or_the_surface() -> None:
    one = fingerprint(REST_SURFACE, {"items": [1], "customerEmail": "a@b"})
    assert one == fingerprint(REST_SURFACE, {"customerEmail": "a@b", "items": [1]})
    assert one != fingerprint(REST_SURFACE, {"items": [2], "customerEmail": "a@b"})
    assert one != fingerprint("graphql createOrder", {"items": [1], "customerEmail": "a@b"})


# REST.


async def test_the_same_key_and_body_twice_returns_the_first_answer_and_makes_one_order(
    http: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    product, email, key = await product_email_key(db_engine, stock=10)
    first = await http.post(CHECKOUT, json=cart(product, 2, email), headers=keyed(key))
    again = await http.post(CHECKOUT, json=cart(product, 2, email), headers=keyed(key))
    assert first.status_code == again.status_code == 200, again.text
    assert again.json() == first.json()
    assert "idempotent-replayed" not in first.headers
    assert again.headers["idempotent-replayed"] == "true"
    assert await orders_of(db_engine, email) == 1
    assert await stock_of(db_engine, product) == 8


async def test_the_same_body_spelled_differently_is_the_same_request(
    http: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    product, email, key = await product_email_key(db_engine)
    body = cart(product, 1, email)
    first = await http.post(CHECKOUT, json=body, headers=keyed(key))
    reordered = json.dumps(dict(reversed(list(body.items()))), indent=2)
    again = await http.post(
        CHECKOUT, content=reordered, headers=keyed(key, {"Content-Type": "application/json"})
    )
    assert again.status_code == 200, again.text
    assert again.json() == first.json()


async def test_the_same_key_with_another_body_is_422_and_changes_nothing(
    http: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    product, email, key = await product_email_key(db_engine, stock=10)
    assert (await http.post(CHECKOUT, json=cart(product, 1, email), headers=keyed(key))).is_success
    other = await http.post(CHECKOUT, json=cart(product, 3, email), headers=keyed(key))
    assert other.status_code == 422
    assert "Idempotency-Key" in other.json()["error"]
    assert await orders_of(db_engine, email) == 1
    assert await stock_of(db_engine, product) == 9


async def test_twenty_concurrent_requests_with_one_key_make_one_order(
    http: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    product, email, key = await product_email_key(db_engine, stock=100)
    answers = await asyncio.gather(
        *(http.post(CHECKOUT, json=cart(product, 1, email), headers=keyed(key)) for _ in range(20))
    )
    assert [a.status_code for a in answers] == [200] * 20, [a.text for a in answers]
    assert len({a.text for a in answers}) == 1
    assert sum(a.headers.get("idempotent-replayed") == "true" for a in answers) == 19
    assert await orders_of(db_engine, email) == 1
    assert await stock_of(db_engine, product) == 99


async def test_another_users_same_key_is_another_key(
    http: httpx.AsyncClient, db_engine: AsyncEngine, service_settings: Settings
) -> None:
    product, email, key = await product_email_key(db_engine)
    ada = bearer_for(service_settings, await make_user(db_engine), "user")
    bob = bearer_for(service_settings, await make_user(db_engine), "user")
    answers = [
        await http.post(CHECKOUT, json=cart(product, 1, email), headers=keyed(key, who))
        for who in (ada, bob, {})
    ]
    assert [a.status_code for a in answers] == [200, 200, 200]
    assert len({a.json()["orderId"] for a in answers}) == 3
    assert await orders_of(db_engine, email) == 3


async def test_a_refused_checkout_holds_no_key(
    http: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    product, email, key = await product_email_key(db_engine, stock=1)
    refused = await http.post(CHECKOUT, json=cart(product, 5, email), headers=keyed(key))
    assert refused.status_code == 400
    fixed = await http.post(CHECKOUT, json=cart(product, 1, email), headers=keyed(key))
    assert fixed.status_code == 200, fixed.text
    assert "idempotent-replayed" not in fixed.headers


async def test_a_key_past_its_window_starts_afresh(
    http: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    product, email, key = await product_email_key(db_engine)
    first = await http.post(CHECKOUT, json=cart(product, 1, email), headers=keyed(key))
    async with db_engine.begin() as conn:
        await conn.execute(
            text(
                "UPDATE checkout_idempotency_keys SET created_at = now() - interval '25 hours'"
                " WHERE key = :key"
            ),
            {"key": key},
        )
    later = await http.post(CHECKOUT, json=cart(product, 2, email), headers=keyed(key))
    assert later.status_code == 200, later.text
    assert later.json()["orderId"] != first.json()["orderId"]


async def test_a_bad_key_is_400_and_a_wrong_credential_with_a_key_is_401(
    http: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    product = await make_product(db_engine)
    bad_key = await http.post(CHECKOUT, json=cart(product), headers=keyed("x" * 256))
    assert bad_key.status_code == 400
    wrong = await http.post(
        CHECKOUT,
        json=cart(product),
        headers=keyed(str(uuid.uuid4()), {"Authorization": "Bearer not.a.token"}),
    )
    assert wrong.status_code == 401


async def test_pruning_deletes_only_keys_past_the_cutoff(
    http: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    product = await make_product(db_engine)
    old, fresh = str(uuid.uuid4()), str(uuid.uuid4())
    for key in (old, fresh):
        assert (await http.post(CHECKOUT, json=cart(product), headers=keyed(key))).is_success
    async with db_engine.begin() as conn:
        await conn.execute(
            text(
                "UPDATE checkout_idempotency_keys SET created_at = now() - interval '2 days'"
                " WHERE key = :key"
            ),
            {"key": old},
        )
    await prune_expired_keys(db_engine, datetime.now(UTC) - timedelta(hours=24), batch=1)
    async with db_engine.connect() as conn:
        kept = set(
            (
                await conn.execute(
                    text("SELECT key FROM checkout_idempotency_keys WHERE key = ANY(:keys)"),
                    {"keys": [old, fresh]},
                )
            ).scalars()
        )
    assert kept == {fresh}


# GraphQL.


async def create_order(
    url: str, product: int, quantity: int, email: str, headers: dict[str, str]
) -> Any:
    return await ask(
        url,
        CREATE_ORDER,
        {
            "input": {
                "items": [{"productId": global_id("Product", product), "quantity": quantity}],
                "customerEmail": email,
            }
        },
        headers=headers,
    )


async def test_create_order_with_one_key_twice_returns_the_same_order(
    graphql_url: str, db_engine: AsyncEngine, service_settings: Settings
) -> None:
    product, email, headers = await buyer_product_email(db_engine, service_settings)
    first = await create_order(graphql_url, product, 1, email, headers)
    again = await create_order(graphql_url, product, 1, email, headers)
    assert first.errors == again.errors == []
    assert again.data == first.data
    assert first.data["createOrder"]["order"]["paymentUrl"]
    assert await orders_of(db_engine, email) == 1


async def test_create_order_with_a_used_key_and_another_input_is_an_error(
    graphql_url: str, db_engine: AsyncEngine, service_settings: Settings
) -> None:
    product, email, headers = await buyer_product_email(db_engine, service_settings)
    assert (await create_order(graphql_url, product, 1, email, headers)).errors == []
    other = await create_order(graphql_url, product, 2, email, headers)
    assert other.codes == ["IDEMPOTENCY_KEY_REUSED"]
    assert other.data is None  # createOrder is non-null: the error nulls the answer
    assert await orders_of(db_engine, email) == 1


async def test_concurrent_create_orders_with_one_key_make_one_order(
    graphql_url: str, db_engine: AsyncEngine, service_settings: Settings
) -> None:
    # Five: createOrder's own @rateLimit allows five per caller in ten seconds.
    product, email, headers = await buyer_product_email(db_engine, service_settings, stock=100)
    answers = await asyncio.gather(
        *(create_order(graphql_url, product, 1, email, headers) for _ in range(5))
    )
    assert [a.errors for a in answers] == [[]] * 5
    assert len({a.data["createOrder"]["order"]["id"] for a in answers}) == 1
    assert await orders_of(db_engine, email) == 1
    assert await stock_of(db_engine, product) == 99
