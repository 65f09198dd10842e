"""GraphQL createOrder: the checkout service behind it, each userErrors code from a real
condition, and who may read an order afterwards."""

from __future__ import annotations

import uuid
from typing import Any

from commerce_content.settings import Settings
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.factories import bearer_for, make_product, make_user
from tests.graphql_client import ask, global_id

CREATE_ORDER = """
mutation($input: CreateOrderInput!) {
  createOrder(input: $input) {
    order { id status total currency paymentUrl lines { productId name unitPrice quantity subtotal } }
    userErrors { field message code }
  }
}
"""
ADDRESS = {
    "name": "Ada Lovelace",
    "line1": "12 St James's Square",
    "city": "London",
    "postalCode": "SW1Y 4JH",
    "country": "GB",
}


async def shopper(engine: AsyncEngine, settings: Settings) -> tuple[int, dict[str, str]]:
    """A fresh user per test: createOrder is rate limited per caller."""
    user_id = await make_user(engine, "user")
    return user_id, bearer_for(settings, user_id, "user")


async def create_order(
    url: str, headers: dict[str, str], items: list[dict[str, Any]], **fields: Any
) -> dict[str, Any]:
    answer = await ask(
        url,
        CREATE_ORDER,
        {"input": {"items": items, "shippingAddress": ADDRESS, **fields}},
        headers=headers,
    )
    assert answer.errors == [], answer.errors
    return dict(answer.data["createOrder"])


async def test_create_order_prices_from_the_catalogue_and_returns_a_payment_url(
    graphql_url: str, db_engine: AsyncEngine, service_settings: Settings
) -> None:
    _, headers = await shopper(db_engine, service_settings)
    mug = await make_product(db_engine, price="19.99", name="Mug")
    shirt = await make_product(db_engine, price="25.00", sale_price="12.50", name="Shirt")
    payload = await create_order(
        graphql_url,
        headers,
        [
            {"productId": global_id("Product", mug), "quantity": 2},
            {"productId": global_id("Product", shirt), "quantity": 1},
        ],
        customerEmail="ada@example.com",
    )
    assert payload["userErrors"] == []
    order = payload["order"]
    assert order["status"] == "PENDING"
    assert order["total"] == "52.48"
    assert order["currency"] == "USD"
    assert order["paymentUrl"].startswith("http")
    assert [(line["name"], line["unitPrice"], line["subtotal"]) for line in order["lines"]] == [
        ("Mug", "19.99", "39.98"),
        ("Shirt", "12.50", "12.50"),
    ]


async def test_insufficient_stock_is_a_user_error_and_stores_nothing(
    graphql_url: str, db_engine: AsyncEngine, service_settings: Settings
) -> None:
    user_id, headers = await shopper(db_engine, service_settings)
    product = await make_product(db_engine, stock=1)
    payload = await create_order(
        graphql_url, headers, [{"productId": global_id("Product", product), "quantity": 2}]
    )
    assert payload["order"] is None
    assert payload["userErrors"] == [
        {
            "field": ["input", "items", "0", "quantity"],
            "message": payload["userErrors"][0]["message"],
            "code": "INSUFFICIENT_STOCK",
        }
    ]
    async with db_engine.connect() as conn:
        orders = await conn.scalar(
            text("SELECT count(*) FROM orders WHERE user_id = :u"), {"u": user_id}
        )
    assert orders == 0


async def test_an_invalid_address_is_a_user_error(
    graphql_url: str, db_engine: AsyncEngine, service_settings: Settings
) -> None:
    _, headers = await shopper(db_engine, service_settings)
    product = await make_product(db_engine)
    answer = await ask(
        graphql_url,
        CREATE_ORDER,
        {
            "input": {
                "items": [{"productId": global_id("Product", product), "quantity": 1}],
                "shippingAddress": {**ADDRESS, "country": "Britain"},
            }
        },
        headers=headers,
    )
    errors = answer.data["createOrder"]["userErrors"]
    assert [(e["code"], e["field"]) for e in errors] == [
        ("INVALID_ADDRESS", ["input", "shippingAddress"])
    ]
    assert "country" in errors[0]["message"]


async def test_a_payment_the_sandbox_declines_is_a_user_error(
    graphql_url: str, db_engine: AsyncEngine, service_settings: Settings
) -> None:
    _, headers = await shopper(db_engine, service_settings)
    product = await make_product(db_engine)
    payload = await create_order(
        graphql_url,
        headers,
        [{"productId": global_id("Product", product), "quantity": 1}],
        customerEmail="card+decline@example.com",
    )
    assert payload["order"] is None
    assert [e["code"] for e in payload["userErrors"]] == ["PAYMENT_DECLINED"]


async def test_an_unpublished_product_is_unavailable(
    graphql_url: str, db_engine: AsyncEngine, service_settings: Settings
) -> None:
    _, headers = await shopper(db_engine, service_settings)
    draft = await make_product(db_engine, published=False)
    payload = await create_order(
        graphql_url, headers, [{"productId": global_id("Product", draft), "quantity": 1}]
    )
    assert [(e["code"], e["field"]) for e in payload["userErrors"]] == [
        ("PRODUCT_UNAVAILABLE", ["input", "items", "0", "productId"])
    ]


async def test_a_product_id_of_another_type_is_unavailable(
    graphql_url: str, db_engine: AsyncEngine, service_settings: Settings
) -> None:
    _, headers = await shopper(db_engine, service_settings)
    payload = await create_order(
        graphql_url, headers, [{"productId": global_id("User", 1), "quantity": 1}]
    )
    assert [e["code"] for e in payload["userErrors"]] == ["PRODUCT_UNAVAILABLE"]


async def test_empty_items_and_bad_quantities_are_user_errors_without_a_code(
    graphql_url: str, db_engine: AsyncEngine, service_settings: Settings
) -> None:
    _, headers = await shopper(db_engine, service_settings)
    product = await make_product(db_engine)
    empty = await create_order(graphql_url, headers, [])
    assert empty["userErrors"] == [
        {"field": ["input", "items"], "message": "items must not be empty", "code": None}
    ]
    zero = await create_order(
        graphql_url, headers, [{"productId": global_id("Product", product), "quantity": 0}]
    )
    assert [(e["field"], e["code"]) for e in zero["userErrors"]] == [
        (["input", "items", "0", "quantity"], None)
    ]


async def test_the_customer_reads_their_order_and_other_users_do_not(
    graphql_url: str, db_engine: AsyncEngine, service_settings: Settings
) -> None:
    _, headers = await shopper(db_engine, service_settings)
    product = await make_product(db_engine)
    order = (
        await create_order(
            graphql_url, headers, [{"productId": global_id("Product", product), "quantity": 1}]
        )
    )["order"]
    query = "query($id: ID!) { node(id: $id) { ... on Order { id status } } }"
    mine = await ask(graphql_url, query, {"id": order["id"]}, headers=headers)
    assert mine.data["node"] == {"id": order["id"], "status": "PENDING"}
    _, stranger = await shopper(db_engine, service_settings)
    assert (await ask(graphql_url, query, {"id": order["id"]}, headers=stranger)).data == {
        "node": None
    }
    assert (await ask(graphql_url, query, {"id": order["id"]})).data == {"node": None}
    manager = bearer_for(service_settings, await make_user(db_engine, "manager"), "manager")
    staff = await ask(graphql_url, query, {"id": order["id"]}, headers=manager)
    assert staff.data["node"]["id"] == order["id"]


async def test_viewer_lists_the_users_own_orders(
    graphql_url: str, db_engine: AsyncEngine, service_settings: Settings
) -> None:
    user_id, headers = await shopper(db_engine, service_settings)
    product = await make_product(db_engine)
    created = await create_order(
        graphql_url, headers, [{"productId": global_id("Product", product), "quantity": 1}]
    )
    answer = await ask(graphql_url, "{ viewer { id role orders { id total } } }", headers=headers)
    assert answer.data["viewer"]["id"] == global_id("User", user_id)
    assert answer.data["viewer"]["role"] == "USER"
    assert [o["id"] for o in answer.data["viewer"]["orders"]] == [created["order"]["id"]]


async def test_anonymous_checkout_works_and_viewer_is_null(
    graphql_url: str, db_engine: AsyncEngine
) -> None:
    product = await make_product(db_engine)
    answer = await ask(
        graphql_url,
        CREATE_ORDER,
        {
            "input": {
                "items": [{"productId": global_id("Product", product), "quantity": 1}],
                "customerEmail": f"{uuid.uuid4().hex[:8]}@example.com",
            }
        },
    )
    assert answer.data["createOrder"]["order"]["status"] == "PENDING"
    assert (await ask(graphql_url, "{ viewer { id } }")).data == {"viewer": None}
