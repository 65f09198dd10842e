"""A query run again from its prepared document answers exactly as the general path does.

Each case sends one request twice to the service (the first runs the general path and keeps
the validated document, the second runs it prepared) and once to a copy of the service with
prepared queries turned off; the three answers must be the same bytes, status and
`Cache-Control`, errors and nulls included.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import httpx
import pytest
from commerce_content.graphql_api.schema import CommerceSchema
from commerce_content.settings import Settings
from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.factories import bearer_for, make_product, make_user, make_variant

PAGE = """
query Page($tag: String!, $first: Int) {
  products(filter: {tags: [$tag]}, page: {first: $first}) {
    edges { cursor node { __typename id name price pricing { basePrice salePrice currency }
      variants { id sku name price inStock } } }
    pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
  }
}"""
GUARDED = """
query Guarded($tag: String!) {
  products(filter: {tags: [$tag]}) { edges { node { name variants { sku stock } } } }
}"""
Sent = tuple[int, bytes, str | None]


async def send(url: str, params: dict[str, Any], headers: dict[str, str], method: str) -> Sent:
    async with httpx.AsyncClient(timeout=30) as http:
        if method == "GET":
            address = {k: v if isinstance(v, str) else json.dumps(v) for k, v in params.items()}
            response = await http.get(url, params=address, headers=headers)
        else:
            response = await http.post(url, json=params, headers=headers)
    return response.status_code, response.content, response.headers.get("cache-control")


async def three_answers(
    general_url: str,
    url: str,
    params: dict[str, Any],
    headers: dict[str, str] | None = None,
    method: str = "POST",
) -> tuple[Sent, Sent, Sent]:
    headers = headers or {}
    expected = await send(general_url, params, headers, method)
    first = await send(url, params, headers, method)
    second = await send(url, params, headers, method)
    return expected, first, second


def schema_of(app: FastAPI) -> CommerceSchema:
    schema: CommerceSchema = app.state.graphql_schema
    return schema


async def tagged_products(engine: AsyncEngine, tag: str, count: int) -> None:
    for n in range(count):
        product = await make_product(engine, tags=[tag], price="12.50", sale_price="9.99")
        await make_variant(engine, product, price="11.00", stock=0)
        await make_variant(engine, product, stock=n)


async def test_a_product_page_answers_the_same_prepared(
    graphql_app: FastAPI, graphql_url: str, general_graphql_url: str, db_engine: AsyncEngine
) -> None:
    await tagged_products(db_engine, "prepared-page", 3)
    params = {"query": PAGE, "variables": {"tag": "prepared-page", "first": 2}}
    expected, first, second = await three_answers(general_graphql_url, graphql_url, params)
    assert first == second == expected
    body = json.loads(second[1])
    assert len(body["data"]["products"]["edges"]) == 2
    assert body["extensions"]["cost"]["requestedQueryCost"] > 0
    assert second[2] == "max-age=30, public"
    runner = schema_of(graphql_app).prepared_runner
    assert runner is not None
    assert runner.prepared.get(PAGE, None) is not None


async def test_a_persisted_query_over_get_answers_the_same_prepared(
    graphql_url: str, general_graphql_url: str, db_engine: AsyncEngine
) -> None:
    await tagged_products(db_engine, "prepared-get", 2)
    query = PAGE.replace("Page(", "PageOverGet(")  # a text of its own, so not yet stored
    extensions = {
        "persistedQuery": {"version": 1, "sha256Hash": hashlib.sha256(query.encode()).hexdigest()}
    }
    variables = {"tag": "prepared-get", "first": 5}
    for url in (general_graphql_url, graphql_url):  # registered (stored once, shared)
        await send(
            url, {"query": query, "variables": variables, "extensions": extensions}, {}, "POST"
        )
    params = {"variables": variables, "extensions": extensions}
    expected, first, second = await three_answers(
        general_graphql_url, graphql_url, params, method="GET"
    )
    assert first == second == expected
    assert expected[0] == 200
    assert expected[2] == "max-age=30, public"


async def test_a_field_refused_inside_lists_answers_the_same_prepared(
    graphql_url: str, general_graphql_url: str, db_engine: AsyncEngine
) -> None:
    await tagged_products(db_engine, "prepared-guarded", 2)
    params = {"query": GUARDED, "variables": {"tag": "prepared-guarded"}}
    expected, first, second = await three_answers(general_graphql_url, graphql_url, params)
    assert first == second == expected
    body = json.loads(second[1])
    assert {error["extensions"]["code"] for error in body["errors"]} == {"UNAUTHENTICATED"}
    assert second[2] is None  # no Cache-Control for an answer with errors


async def test_a_refused_field_for_one_caller_and_not_another_answers_the_same_prepared(
    graphql_url: str,
    general_graphql_url: str,
    db_engine: AsyncEngine,
    service_settings: Settings,
) -> None:
    """The document is kept, never the answer: a manager then sees what a guest could not."""
    await tagged_products(db_engine, "prepared-roles", 1)
    params = {
        "query": GUARDED.replace("Guarded", "GuardedRoles"),
        "variables": {"tag": "prepared-roles"},
    }
    manager = bearer_for(service_settings, await make_user(db_engine, role="manager"), "manager")
    await send(graphql_url, params, {}, "POST")  # kept, as a guest who was refused
    expected, first, second = await three_answers(
        general_graphql_url, graphql_url, params, headers=manager
    )
    assert first == second == expected
    stocks = json.loads(second[1])["data"]["products"]["edges"][0]["node"]["variants"]
    assert [variant["stock"] for variant in stocks] == [0, 0]
    assert second[2] == "max-age=60, private"


@pytest.mark.parametrize(
    ("variables", "code"),
    [
        ({"tag": "prepared-bad", "first": -1}, "BAD_USER_INPUT"),  # the resolver refuses
        ({"tag": "prepared-bad", "first": "two"}, None),  # variable coercion: no code
        ({"tag": "prepared-bad\u0000", "first": 1}, "BAD_USER_INPUT"),  # unstorable text
        ({"tag": "prepared-bad", "first": 100}, "MAX_COST_EXCEEDED"),
    ],
    ids=["resolver", "coercion", "unstorable", "too costly"],
)
async def test_refused_variables_answer_the_same_prepared(
    graphql_url: str, general_graphql_url: str, variables: dict[str, Any], code: str | None
) -> None:
    """Kept at a cheap page with good variables, then sent with these: refused alike (the
    cost depends on the variables)."""
    params = {"query": PAGE, "variables": variables}
    await send(graphql_url, {"query": PAGE, "variables": {"tag": "x", "first": 1}}, {}, "POST")
    expected, first, second = await three_answers(general_graphql_url, graphql_url, params)
    assert first == second == expected
    errors = json.loads(second[1])["errors"]
    assert [(error.get("extensions") or {}).get("code") for error in errors] == [code]


async def test_a_document_that_fails_validation_is_not_kept(
    graphql_app: FastAPI, graphql_url: str
) -> None:
    query = "query Wrong { products { edges { node { nope } } } }"
    status, body, _ = await send(graphql_url, {"query": query}, {}, "POST")
    assert status == 200
    assert b"nope" in body
    runner = schema_of(graphql_app).prepared_runner
    assert runner is not None
    assert runner.prepared.get(query, None) is None
