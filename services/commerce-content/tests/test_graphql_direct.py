"""A plain page of products built from its rows (`direct.py`) answers exactly as the general
path does: same bytes, status and `Cache-Control`, for every field it builds, every way of
paging, and every refusal (which it leaves to the other paths).

Each case sends one request to a copy of the service with prepared queries turned off, then
twice to the service (the first runs the general path and keeps the document, the second is
answered from the rows).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
import strawberry
from commerce_content.graphql_api.adapter import core_schema
from commerce_content.graphql_api.direct import DirectPages, direct_page
from commerce_content.graphql_api.directives import guarded_field
from commerce_content.graphql_api.pagination import ProductConnection
from commerce_content.graphql_api.scalars import SCALARS
from commerce_content.graphql_api.schema import build_schema
from commerce_content.identity.roles import Role
from commerce_content.settings import Settings
from fastapi import FastAPI
from graphql import OperationDefinitionNode, parse
from sqlalchemy.ext.asyncio import AsyncEngine
from strawberry.schema.config import StrawberryConfig

from tests.factories import bearer_for, make_product, make_user, make_variant
from tests.test_graphql_prepared import schema_of, send, three_answers

# Every field the direct path builds, aliases and __typename included.
EVERY_FIELD = """
query Every($tag: String!, $first: Int, $after: String) {
  page: products(filter: {tags: [$tag]}, page: {first: $first, after: $after}) {
    __typename
    edges { __typename cursor node { __typename id name
      pricing { __typename basePrice salePrice currency }
      variants { __typename id sku name price inStock } } }
    pageInfo { __typename hasNextPage hasPreviousPage startCursor endCursor }
  }
}"""
SHORT = """
query Short($tag: String!, $last: Int, $before: String) {
  products(filter: {tags: [$tag]}, page: {last: $last, before: $before}) {
    edges { cursor node { renamed: name pricing { basePrice } } }
    pageInfo { hasPreviousPage startCursor }
  }
}"""


async def catalogue(engine: AsyncEngine, tag: str) -> None:
    """Prices with and without a sale, variants with and without their own price, a product
    without variants, one out of stock."""
    first = await make_product(engine, tags=[tag], price="12.50", sale_price="9.99")
    await make_variant(engine, first, price="11.00", stock=0)
    await make_variant(engine, first, stock=4)
    await make_product(engine, tags=[tag], price="7.00", name='Quoted "name" \u00e9')
    third = await make_product(engine, tags=[tag], price="100.10")
    await make_variant(engine, third, stock=1)
    await make_product(engine, tags=[tag], price="3.00", published=False)  # managers only


def direct_count(app: FastAPI) -> int:
    runner = schema_of(app).prepared_runner
    assert runner is not None
    assert isinstance(runner.direct, DirectPages)
    return runner.direct.answered


async def answers_alike(
    app: FastAPI,
    general_url: str,
    url: str,
    params: dict[str, Any],
    headers: dict[str, str] | None = None,
    method: str = "POST",
) -> tuple[int, bytes, str | None]:
    before = direct_count(app)
    expected, first, second = await three_answers(general_url, url, params, headers, method)
    assert first == second == expected
    assert direct_count(app) > before  # answered from the rows (at least the second time)
    return second


async def test_every_field_of_a_page_answers_as_the_general_path(
    graphql_app: FastAPI, graphql_url: str, general_graphql_url: str, db_engine: AsyncEngine
) -> None:
    await catalogue(db_engine, "direct-every")
    params = {"query": EVERY_FIELD, "variables": {"tag": "direct-every", "first": 2}}
    status, body, cache = await answers_alike(graphql_app, general_graphql_url, graphql_url, params)
    assert status == 200
    page = json.loads(body)["data"]["page"]
    assert len(page["edges"]) == 2
    assert page["pageInfo"]["hasNextPage"] is True
    assert cache == "max-age=30, public"


async def test_the_next_page_by_its_cursor_answers_as_the_general_path(
    graphql_app: FastAPI, graphql_url: str, general_graphql_url: str, db_engine: AsyncEngine
) -> None:
    await catalogue(db_engine, "direct-next")
    params = {"query": EVERY_FIELD, "variables": {"tag": "direct-next", "first": 1}}
    _, body, _ = await send(graphql_url, params, {}, "POST")
    after = json.loads(body)["data"]["page"]["pageInfo"]["endCursor"]
    params = {"query": EVERY_FIELD, "variables": {"tag": "direct-next", "first": 5, "after": after}}
    _, body, _ = await answers_alike(graphql_app, general_graphql_url, graphql_url, params)
    assert json.loads(body)["data"]["page"]["pageInfo"]["hasPreviousPage"] is True


async def test_a_page_from_the_end_answers_as_the_general_path(
    graphql_app: FastAPI, graphql_url: str, general_graphql_url: str, db_engine: AsyncEngine
) -> None:
    await catalogue(db_engine, "direct-last")
    params = {"query": SHORT, "variables": {"tag": "direct-last", "last": 2}}
    _, body, _ = await answers_alike(graphql_app, general_graphql_url, graphql_url, params)
    edges = json.loads(body)["data"]["products"]["edges"]
    assert [set(edge["node"]) for edge in edges] == [{"renamed", "pricing"}] * 2


async def test_a_page_from_the_end_with_variants_answers_as_the_general_path(
    graphql_app: FastAPI, graphql_url: str, general_graphql_url: str, db_engine: AsyncEngine
) -> None:
    await catalogue(db_engine, "direct-last-variants")
    query = SHORT.replace("pricing { basePrice }", "variants { sku price inStock }")
    _, body, _ = await send(
        graphql_url, {"query": query, "variables": {"tag": "direct-last-variants"}}, {}, "POST"
    )
    before = json.loads(body)["data"]["products"]["edges"][-1]["cursor"]
    params = {
        "query": query,
        "variables": {"tag": "direct-last-variants", "last": 2, "before": before},
    }
    _, body, _ = await answers_alike(graphql_app, general_graphql_url, graphql_url, params)
    edges = json.loads(body)["data"]["products"]["edges"]
    assert [len(edge["node"]["variants"]) for edge in edges] == [2, 0]


async def test_an_empty_page_answers_as_the_general_path(
    graphql_app: FastAPI, graphql_url: str, general_graphql_url: str
) -> None:
    params = {"query": EVERY_FIELD, "variables": {"tag": "direct-none", "first": 3}}
    _, body, _ = await answers_alike(graphql_app, general_graphql_url, graphql_url, params)
    assert json.loads(body)["data"]["page"]["pageInfo"]["startCursor"] is None


async def test_a_manager_sees_drafts_privately_as_the_general_path(
    graphql_app: FastAPI,
    graphql_url: str,
    general_graphql_url: str,
    db_engine: AsyncEngine,
    service_settings: Settings,
) -> None:
    await catalogue(db_engine, "direct-drafts")
    manager = bearer_for(service_settings, await make_user(db_engine, role="manager"), "manager")
    params = {"query": EVERY_FIELD, "variables": {"tag": "direct-drafts", "first": 10}}
    _, body, cache = await answers_alike(
        graphql_app, general_graphql_url, graphql_url, params, headers=manager
    )
    assert len(json.loads(body)["data"]["page"]["edges"]) == 4
    assert cache == "max-age=30, private"


async def test_a_persisted_page_over_get_answers_as_the_general_path(
    graphql_app: FastAPI, graphql_url: str, general_graphql_url: str, db_engine: AsyncEngine
) -> None:
    await catalogue(db_engine, "direct-get")
    query = EVERY_FIELD.replace("Every(", "EveryOverGet(")
    digest = hashlib.sha256(query.encode()).hexdigest()
    extensions = {"persistedQuery": {"version": 1, "sha256Hash": digest}}
    variables = {"tag": "direct-get", "first": 3}
    for url in (general_graphql_url, graphql_url):  # registered (stored once, shared)
        await send(
            url, {"query": query, "variables": variables, "extensions": extensions}, {}, "POST"
        )
    params = {"variables": variables, "extensions": extensions}
    status, _, cache = await answers_alike(
        graphql_app, general_graphql_url, graphql_url, params, method="GET"
    )
    assert (status, cache) == (200, "max-age=30, public")


@pytest.mark.parametrize(
    ("variables", "code"),
    [
        ({"tag": "direct-bad", "first": -1}, "BAD_USER_INPUT"),  # the resolver refuses
        ({"tag": "direct-bad", "first": 1, "after": "bm9wZQ"}, "BAD_USER_INPUT"),  # no cursor
        ({"tag": "direct-bad", "first": "two"}, None),  # variable coercion: no code
        ({"first": 1}, None),  # a required variable missing
        ({"tag": "direct-bad\u0000", "first": 1}, "BAD_USER_INPUT"),  # unstorable text
        ({"tag": "direct-bad", "first": 100}, "MAX_COST_EXCEEDED"),
    ],
    ids=["resolver", "cursor", "coercion", "missing", "unstorable", "too costly"],
)
async def test_refused_variables_answer_as_the_general_path(
    graphql_app: FastAPI,
    graphql_url: str,
    general_graphql_url: str,
    variables: dict[str, Any],
    code: str | None,
) -> None:
    """Kept and answered from rows once with good variables, then sent with these: left to
    the other paths, refused alike."""
    query = EVERY_FIELD.replace("Every(", "EveryRefused(")
    await send(graphql_url, {"query": query, "variables": {"tag": "x", "first": 1}}, {}, "POST")
    before = direct_count(graphql_app)
    params = {"query": query, "variables": variables}
    expected, first, second = await three_answers(general_graphql_url, graphql_url, params)
    assert first == second == expected
    assert direct_count(graphql_app) == before
    errors = json.loads(second[1])["errors"]
    assert [(error.get("extensions") or {}).get("code") for error in errors] == [code]


async def test_wrong_credentials_answer_as_the_general_path(
    graphql_url: str, general_graphql_url: str
) -> None:
    params = {"query": EVERY_FIELD, "variables": {"tag": "direct-auth", "first": 1}}
    headers = {"Authorization": "Bearer not.a.token"}
    expected, first, second = await three_answers(general_graphql_url, graphql_url, params, headers)
    assert first == second == expected
    assert expected[0] == 401


def operation_of(query: str) -> OperationDefinitionNode:
    operation = parse(query).definitions[0]
    assert isinstance(operation, OperationDefinitionNode)
    return operation


@pytest.mark.parametrize(
    "query",
    [
        "{ products { totalCount } }",  # a resolver of its own
        "{ products { edges { node { price } } } }",  # a resolver of its own (deprecated)
        "{ products { edges { node { variants { stock } } } } }",  # @auth
        "{ products { edges { node { ...F } } } } fragment F on Product { id }",
        "query($x: Boolean!) { products { edges @include(if: $x) { cursor } } }",
        "{ products { edges { cursor } edges { node { id } } } }",  # merged fields
        "{ products { edges { cursor } } viewer { id } }",  # two root fields
        '{ product(id: "UHJvZHVjdDox") { id } }',
        "mutation { createOrder(items: []) { __typename } }",
    ],
    ids=[
        "totalCount",
        "price",
        "guarded",
        "fragment",
        "directive",
        "merged",
        "two roots",
        "other root",
        "mutation",
    ],
)
def test_operations_the_rows_cannot_answer_are_left_to_the_other_paths(
    service_settings: Settings, query: str
) -> None:
    schema = core_schema(build_schema(service_settings))
    assert direct_page(schema, operation_of(query)) is None


def test_a_plain_page_is_answered_from_rows(service_settings: Settings) -> None:
    schema = core_schema(build_schema(service_settings))
    page = direct_page(schema, operation_of(EVERY_FIELD))
    assert page is not None
    assert page.key == "page"
    assert page.selects_variants


@strawberry.type
class GuardedQuery:
    @guarded_field(rate_limit=(1, "1m"))
    async def products(self) -> ProductConnection:  # pragma: no cover - never resolved here
        raise NotImplementedError


@strawberry.type
class AuthQuery:
    @guarded_field(auth=Role.MANAGER)
    async def products(self) -> ProductConnection:  # pragma: no cover - never resolved here
        raise NotImplementedError


@strawberry.type
class OpenQuery:
    @guarded_field()
    async def products(self) -> ProductConnection:  # pragma: no cover - never resolved here
        raise NotImplementedError


@pytest.mark.parametrize(
    ("query_type", "direct"),
    [(GuardedQuery, False), (AuthQuery, False), (OpenQuery, True)],
    ids=["rate limited", "auth", "unguarded"],
)
def test_a_guarded_products_field_is_never_answered_from_rows(
    query_type: type, direct: bool
) -> None:
    """@rateLimit and @auth run as field extensions, on the other paths only."""
    schema = strawberry.Schema(query=query_type, config=StrawberryConfig(scalar_map=SCALARS))
    page = direct_page(core_schema(schema), operation_of("{ products { edges { cursor } } }"))
    assert (page is not None) is direct
