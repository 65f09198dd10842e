"""Bad input to /graphql is the client's error (`BAD_USER_INPUT`, or a 400 for a request that
cannot run), never "Unexpected error." nor a 500: decimals that are not plain numbers, NUL
characters and lone surrogates in any string, documents without an operation."""

from __future__ import annotations

import base64
import json
from decimal import Decimal
from typing import Any

import httpx
import pytest
from commerce_content.graphql_api.scalars import serialize_decimal
from commerce_content.settings import Settings
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.factories import bearer_for, make_user

FILTERED = "query($filter: ProductFilter) { products(filter: $filter) { totalCount } }"
NOT_DECIMALS = ["NaN", "Infinity", "-Infinity", "1e1000000", "1e30", "1.5e2", " 1.5", ""]


async def post(
    url: str,
    query: str,
    variables: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    # JSON's ASCII escapes carry lone surrogates, which UTF-8 cannot.
    body = json.dumps({"query": query, "variables": variables}, ensure_ascii=True)
    async with httpx.AsyncClient(timeout=30) as http:
        return await http.post(
            url, content=body, headers={"content-type": "application/json", **(headers or {})}
        )


def codes(response: httpx.Response) -> list[str]:
    return [str((e.get("extensions") or {}).get("code")) for e in response.json()["errors"]]


@pytest.mark.parametrize("text", NOT_DECIMALS)
async def test_a_decimal_literal_that_is_not_a_plain_number_is_bad_user_input(
    graphql_url: str, text: str
) -> None:
    response = await post(
        graphql_url, f'{{ products(filter: {{priceMin: "{text}"}}) {{ totalCount }} }}'
    )
    assert response.status_code == 200
    assert response.json()["data"] is None
    assert codes(response) == ["BAD_USER_INPUT"]
    assert "Decimal values are strings" in response.json()["errors"][0]["message"]


@pytest.mark.parametrize("value", [*NOT_DECIMALS, 1.5, 2])
async def test_a_decimal_variable_that_is_not_a_plain_number_is_bad_user_input(
    graphql_url: str, value: object
) -> None:
    response = await post(graphql_url, FILTERED, {"filter": {"priceMax": value}})
    assert response.json()["data"] is None
    assert codes(response) == ["BAD_USER_INPUT"]


async def test_a_number_literal_for_a_decimal_is_bad_user_input(graphql_url: str) -> None:
    response = await post(graphql_url, "{ products(filter: {priceMin: 1.5}) { totalCount } }")
    assert codes(response) == ["BAD_USER_INPUT"]


async def test_a_huge_base_price_is_bad_user_input(
    graphql_url: str, db_engine: AsyncEngine, service_settings: Settings
) -> None:
    manager = bearer_for(service_settings, await make_user(db_engine, "manager"), "manager")
    response = await post(
        graphql_url,
        'mutation { createProduct(input: {name: "n", slug: "huge-price", basePrice: "1e30"})'
        " { product { id } userErrors { message } } }",
        headers=manager,
    )
    assert response.json()["data"] is None
    assert codes(response) == ["BAD_USER_INPUT"]


@pytest.mark.parametrize("text", ["a\x00b", "a\ud800b", "\udfff"])
@pytest.mark.parametrize(
    "filter_", [lambda t: {"search": t}, lambda t: {"tags": ["ok", t]}], ids=["search", "tags"]
)
async def test_nul_and_lone_surrogates_in_string_variables_are_bad_user_input(
    graphql_url: str, text: str, filter_: Any
) -> None:
    # Refused by the servicekit input guard before GraphQL runs: a request error, no `data`.
    response = await post(graphql_url, FILTERED, {"filter": filter_(text)})
    assert response.status_code == 400
    assert "data" not in response.json()
    assert codes(response) == ["BAD_USER_INPUT"]
    message = response.json()["errors"][0]["message"]
    assert "NUL" in message or "surrogate" in message


@pytest.mark.parametrize("number", ["1e400", "NaN", "-Infinity"])
async def test_a_variable_no_float_holds_is_a_request_error_naming_it(
    graphql_url: str, number: str
) -> None:
    """Refused where the JSON is read (the input guard), as no float can carry it further."""
    body = json.dumps({"query": FILTERED, "variables": {"filter": {"priceMax": 0}}})
    body = body.replace('"priceMax": 0', f'"priceMax": {number}')
    async with httpx.AsyncClient(timeout=30) as http:
        response = await http.post(
            graphql_url, content=body, headers={"content-type": "application/json"}
        )
    assert response.status_code == 400, response.text
    assert codes(response) == ["BAD_USER_INPUT"]
    assert response.json()["errors"][0]["message"].startswith(
        "body.variables.filter.priceMax is a number outside the range of a 64-bit float"
    )


async def test_a_variable_no_float_holds_in_the_address_is_a_request_error_naming_it(
    graphql_url: str,
) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        response = await http.get(
            graphql_url,
            params={"query": FILTERED, "variables": '{"filter": {"priceMax": 1e400}}'},
        )
    assert response.status_code == 400, response.text
    assert codes(response) == ["BAD_USER_INPUT"]
    assert response.json()["errors"][0]["message"].startswith(
        "variables.filter.priceMax is a number outside the range of a 64-bit float"
    )


@pytest.mark.parametrize("literal", ['search: "a\\u0000b"', 'tags: ["a\\u0000b"]'])
async def test_a_nul_in_a_string_literal_is_bad_user_input(graphql_url: str, literal: str) -> None:
    response = await post(graphql_url, f"{{ products(filter: {{{literal}}}) {{ totalCount }} }}")
    assert response.json()["data"] is None
    assert codes(response) == ["BAD_USER_INPUT"]


async def test_a_lone_surrogate_escaped_in_a_string_literal_is_a_syntax_error(
    graphql_url: str,
) -> None:
    # Escaped in the GraphQL text, so no surrogate reaches the JSON the input guard reads.
    response = await post(graphql_url, '{ products(filter: {search: "\\uD800"}) { totalCount } }')
    assert response.json()["data"] is None
    assert response.json()["errors"][0]["message"].startswith("Syntax Error")


async def test_a_nul_in_a_mutation_input_changes_nothing(
    graphql_url: str, db_engine: AsyncEngine, service_settings: Settings
) -> None:
    manager = bearer_for(service_settings, await make_user(db_engine, "manager"), "manager")
    response = await post(
        graphql_url,
        "mutation($name: String!) { createProduct(input:"
        ' {name: $name, slug: "nul-name", basePrice: "1.00"}) { product { id } } }',
        {"name": "a\x00b"},
        headers=manager,
    )
    assert response.status_code == 400
    assert response.json().get("data") is None
    assert codes(response) == ["BAD_USER_INPUT"]
    async with db_engine.connect() as connection:
        stored = await connection.scalar(
            text("SELECT count(*) FROM products WHERE slug = 'nul-name'")
        )
    assert stored == 0


async def test_a_document_without_an_operation_is_a_400(graphql_url: str) -> None:
    response = await post(graphql_url, "fragment F on Query { __typename }")
    assert response.status_code == 400
    assert codes(response) == ["BAD_USER_INPUT"]
    assert "operation" in response.json()["errors"][0]["message"]


async def test_an_unknown_operation_name_is_a_400(graphql_url: str) -> None:
    async with httpx.AsyncClient() as http:
        response = await http.post(
            graphql_url, json={"query": "query A { __typename }", "operationName": "B"}
        )
    assert response.status_code == 400
    assert codes(response) == ["BAD_USER_INPUT"]


@pytest.mark.parametrize(
    "query",
    [
        '{ product(id: "UHJvZHVjdDo5OTk5OTk5OTk5OTk5OTk5OTk5OQ") { id } }',  # Product:9999…
        '{ node(id: "T3JkZXI6OTk5OTk5OTk5OTk5OTk5OTk5OTk") { id } }',  # Order:9999…
        '{ products(filter: {categoryIds: ["99999999999999999999"]}) { totalCount } }',
        "{ products(page: {first: 99999999999}) { totalCount } }",
    ],
)
async def test_ids_and_counts_beyond_the_database_range_are_bad_user_input(
    graphql_url: str, query: str
) -> None:
    response = await post(graphql_url, query)
    assert response.status_code == 200
    assert set(codes(response)) <= {"BAD_USER_INPUT", "GRAPHQL_VALIDATION_FAILED", "None"}
    assert "Unexpected error." not in response.text


def gid(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


@pytest.mark.parametrize(
    ("query", "variables"),
    [
        ("query($id: ID!) { product(id: $id) { id } }", {"id": gid("Product:²")}),
        ("query($id: ID!) { node(id: $id) { id } }", {"id": gid("Order:٣")}),
        (FILTERED, {"filter": {"categoryIds": ["²"]}}),
        (FILTERED, {"filter": {"categoryIds": [gid("Category:²")]}}),
        (
            "query($after: String) { products(page: {after: $after}) { totalCount } }",
            {"after": gid("cursor:v1:²")},
        ),
    ],
)
async def test_ids_of_unicode_digits_are_bad_user_input(
    graphql_url: str, query: str, variables: dict[str, Any]
) -> None:
    response = await post(graphql_url, query, variables)
    assert codes(response) == ["BAD_USER_INPUT"]


async def test_an_order_line_with_a_unicode_digit_id_is_a_user_error(graphql_url: str) -> None:
    response = await post(
        graphql_url,
        "mutation($id: ID!) { createOrder(input: {items: [{productId: $id, quantity: 1}]})"
        " { userErrors { code } } }",
        {"id": gid("Product:²")},
    )
    assert response.json()["data"]["createOrder"]["userErrors"] == [{"code": "PRODUCT_UNAVAILABLE"}]


@pytest.mark.parametrize(
    "value",
    ["19.90", "0.00", "-0.00", "5", "100000000.01", "0.0000001", "1E+2", "1.5E-9", "-3E+1"],
)
def test_decimals_are_written_in_fixed_point(value: str) -> None:
    assert serialize_decimal(Decimal(value)) == format(Decimal(value), "f")
    assert "E" not in serialize_decimal(Decimal(value))
