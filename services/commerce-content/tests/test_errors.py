"""One error system: the same domain error classes are REST's statuses and GraphQL's
userErrors codes, and document themselves in OpenAPI."""

from __future__ import annotations

import uuid

import httpx
import pytest
from commerce_content import errors
from commerce_content.errors import (
    CheckoutError,
    CommerceError,
    DuplicateSlug,
    InsufficientStock,
    InvalidAddress,
    PaymentDeclined,
    ProductError,
    ProductUnavailable,
)
from commerce_content.graphql_api.mutations import (
    OrderErrorCode,
    ProductErrorCode,
    order_user_error,
    product_user_errors,
)
from commerce_content.settings import Settings
from servicekit.errors import ServiceError
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.factories import bearer_for, make_product, make_user
from tests.graphql_client import ask, global_id

CREATE_ORDER = """
mutation($input: CreateOrderInput!) {
  createOrder(input: $input) { order { id } userErrors { field message code } }
}
"""
CREATE_PRODUCT = """
mutation($input: ProductCreateInput!) {
  createProduct(input: $input) { product { id } userErrors { field message code } }
}
"""


def _classes() -> list[type[CommerceError]]:
    return [
        value
        for value in vars(errors).values()
        if isinstance(value, type) and issubclass(value, CommerceError)
    ]


def test_every_error_of_the_service_is_a_commerce_error_with_a_servicekit_status() -> None:
    for cls in _classes():
        assert issubclass(cls, ServiceError)
        # Only the bases are abstract (500): every error raised says what the client did.
        assert cls in (CommerceError, ProductError) or cls.status_code != 500, cls


def test_each_order_error_code_of_the_schema_is_exactly_one_checkout_error() -> None:
    codes = [cls.order_code for cls in _classes() if issubclass(cls, CheckoutError)]
    assert sorted(c for c in codes if c) == sorted(code.value for code in OrderErrorCode)


def test_each_product_error_code_of_the_schema_comes_from_a_product_error() -> None:
    codes = {cls.product_code for cls in _classes() if issubclass(cls, ProductError)}
    assert codes == {code.value for code in ProductErrorCode}


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (InsufficientStock("items[0]: only 1 left", field=("items", "0")), "INSUFFICIENT_STOCK"),
        (InvalidAddress("shippingAddress is invalid: city"), "INVALID_ADDRESS"),
        (PaymentDeclined("declined"), "PAYMENT_DECLINED"),
        (ProductUnavailable("items[0]: gone"), "PRODUCT_UNAVAILABLE"),
    ],
)
def test_a_checkout_error_is_a_400_text_starting_with_its_code_and_a_user_error_with_it(
    error: CheckoutError, code: str
) -> None:
    assert error.status_code == 400
    assert error.message == f"{code}: {error.detail}"
    user_error = order_user_error(error)
    assert user_error.code == OrderErrorCode(code)
    assert user_error.message == error.detail


def test_an_input_problem_of_checkout_has_no_order_code_and_no_prefix() -> None:
    error = CheckoutError("items must not be empty", field=("items",))
    assert error.message == "items must not be empty"
    user_error = order_user_error(error)
    assert user_error.code is None
    assert user_error.field == ["input", "items"]


def test_a_duplicate_slug_is_a_409_and_a_duplicate_slug_user_error() -> None:
    error = DuplicateSlug("The alias 'mug' is already used", field=("slug",))
    assert error.status_code == 409
    [user_error] = product_user_errors([error])
    assert (user_error.code, user_error.field) == (
        ProductErrorCode.DUPLICATE_SLUG,
        ["input", "slug"],
    )


async def test_insufficient_stock_is_the_same_error_over_rest_and_graphql(
    client: httpx.AsyncClient, graphql_url: str, db_engine: AsyncEngine, service_settings: Settings
) -> None:
    product = await make_product(db_engine, stock=1, name="Last mug")
    rest = await client.post(
        "/api/orders/checkout", json={"items": [{"productId": str(product), "quantity": 2}]}
    )
    user_id = await make_user(db_engine, "user")
    graphql = await ask(
        graphql_url,
        CREATE_ORDER,
        {"input": {"items": [{"productId": global_id("Product", product), "quantity": 2}]}},
        headers=bearer_for(service_settings, user_id, "user"),
    )
    [user_error] = graphql.data["createOrder"]["userErrors"]
    assert rest.status_code == 400
    assert user_error["code"] == "INSUFFICIENT_STOCK"
    assert rest.json() == {"error": f"INSUFFICIENT_STOCK: {user_error['message']}"}
    assert user_error["field"] == ["input", "items", "0", "quantity"]


async def test_a_taken_alias_is_the_same_error_over_the_content_api_and_graphql(
    client: httpx.AsyncClient, graphql_url: str, db_engine: AsyncEngine, service_settings: Settings
) -> None:
    manager = bearer_for(service_settings, await make_user(db_engine, "manager"), "manager")
    slug = f"mug-{uuid.uuid4().hex[:8]}"
    item = {"name": "Mug", "slug": slug, "description": "", "base_price": "9.99"}
    assert (
        await client.post("/api/content/products", json=item, headers=manager)
    ).status_code == 201
    rest = await client.post("/api/content/products", json=item, headers=manager)
    graphql = await ask(
        graphql_url,
        CREATE_PRODUCT,
        {"input": {"name": "Mug", "slug": slug, "basePrice": "9.99"}},
        headers=manager,
    )
    [user_error] = graphql.data["createProduct"]["userErrors"]
    assert rest.status_code == 409
    assert user_error["code"] == "DUPLICATE_SLUG"
    assert rest.json() == {"error": user_error["message"]}


def test_each_operation_documents_its_errors_in_its_route_groups_envelope(
    service_settings: Settings,
) -> None:
    from commerce_content.app import create_app

    document = create_app(service_settings).openapi()
    checkout = document["paths"]["/api/orders/checkout"]["post"]["responses"]["400"]
    examples = checkout["content"]["application/json"]["examples"]
    assert examples["insufficient_stock"]["value"] == {
        "error": f"INSUFFICIENT_STOCK: {InsufficientStock.default_message}"
    }
    articles = document["paths"]["/api/v1/articles/{article_id}"]["get"]["responses"]["404"]
    [example] = articles["content"]["application/json"]["examples"].values()
    assert set(example["value"]["error"]) == {"code", "message"}
