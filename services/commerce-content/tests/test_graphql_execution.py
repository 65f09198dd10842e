"""The shorter execution path for plain fields answers exactly as graphql-core does.

Each case runs one operation twice, once with the service's executor and once with
strawberry's stock one, and compares data and errors (messages, paths, locations). First on
a small schema built to hit every way out of the short path, then on the service itself over
HTTP, where the real product pages, lazily loaded variants and guarded fields are.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, cast

import pytest
import strawberry
from commerce_content.app import create_app
from commerce_content.graphql_api.adapter import (
    STOCK_EXECUTION_CONTEXT,
    PlainFieldExecutionContext,
    PlainLeaf,
    core_schema,
    executor_for,
)
from commerce_content.settings import Settings
from servicekit.testing import run_http_server
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.factories import bearer_for, make_product, make_user, make_variant
from tests.graphql_client import Answer, ask, global_id


@strawberry.type
class Leaf:
    name: str
    note: str | None = None

    @strawberry.field
    def checked(self) -> str:
        if self.name == "refused":
            raise ValueError("refused by its resolver")
        return self.name.upper()


@dataclass
class LookAlike:
    """Not a `Leaf`, but has its attributes: graphql-core does not check the class."""

    name: str
    note: str | None = None

    def checked(self) -> str:
        return self.name


async def later(value: Any) -> Any:
    await asyncio.sleep(0)
    return value


@strawberry.type
class Box:
    label: str
    leaf: Leaf
    maybe: Leaf | None
    leaves: list[Leaf]
    loose: list[Leaf | None]
    count: int = 0

    @strawberry.field
    def inspected(self) -> str | None:
        if self.label == "a resolver fails inside a list":
            raise ValueError("the box's own resolver failed first")
        return "inspected"


def box(case: str) -> Box | None:
    good = Leaf(name="good", note="fine")
    leaf: Any = good
    leaves: list[Any] = [good, Leaf(name="second")]
    loose: list[Any] = [None, good]
    maybe: Any = None
    label: Any = case
    count: Any = 3
    if case == "null in a non-null leaf":
        leaf = Leaf(name=None)  # type: ignore[arg-type]
    elif case == "null item in a non-null list":
        leaves = [good, None]
    elif case == "look-alike object":
        leaf = LookAlike(name="alike")
        leaves = [LookAlike(name="alike"), good]
    elif case == "awaitable values":
        maybe = later(Leaf(name="later"))
        leaves = [good, later(Leaf(name="later item"))]
    elif case == "a resolver fails inside a list":
        leaves = [good, Leaf(name="refused")]
        maybe = Leaf(name="refused")
    elif case == "a scalar refuses a value":
        count = "not a number"
        label = Decimal("1.5")
    elif case == "not a list":
        leaves = good  # type: ignore[assignment]
    elif case == "missing box":
        return None
    return Box(label=label, leaf=leaf, maybe=maybe, leaves=leaves, loose=loose, count=count)


@strawberry.type
class Query:
    @strawberry.field
    def boxes(self, cases: list[str]) -> list[Box | None]:
        return [box(case) for case in cases]

    @strawberry.field
    def strict(self, case: str) -> Box:
        return box(case)  # type: ignore[return-value]


CASES = [
    "good",
    "null in a non-null leaf",
    "null item in a non-null list",
    "look-alike object",
    "awaitable values",
    "a resolver fails inside a list",
    "a scalar refuses a value",
    "not a list",
    "missing box",
]
SELECTION = """
  inspected
  label count
  leaf { name note checked }
  maybe { name checked }
  leaves { name note checked }
  loose { name }
  again: leaf { name }
  ... on Box { leaf { note } }
"""
# Only fields without resolvers (and `__typename`): the whole selection is compiled into one
# plan per operation, which must give way to graphql-core at anything unusual.
PLAIN_SELECTION = """
  __typename
  label count
  leaf { name note __typename }
  maybe { name }
  leaves { name note }
  loose { name __typename }
  again: leaf { name }
  ... on Box { leaf { note } }
"""


def schemas() -> tuple[strawberry.Schema, strawberry.Schema]:
    stock = strawberry.Schema(query=Query)
    fast = strawberry.Schema(query=Query)
    fast.execution_context_class = executor_for(core_schema(fast))
    assert stock.execution_context_class is STOCK_EXECUTION_CONTEXT
    return stock, fast


def as_sent(data: Any, errors: list[Any]) -> str:
    """The response as JSON text: the order of its keys counts too."""
    return json.dumps({"data": data, "errors": errors})


async def both(query: str, variables: dict[str, Any]) -> tuple[str, str]:
    stock, fast = schemas()
    expected = await stock.execute(query, variable_values=variables)
    actual = await fast.execute(query, variable_values=variables)
    return (
        as_sent(expected.data, [error.formatted for error in expected.errors or []]),
        as_sent(actual.data, [error.formatted for error in actual.errors or []]),
    )


@pytest.mark.parametrize("selection", [SELECTION, PLAIN_SELECTION], ids=["guarded", "plain"])
@pytest.mark.parametrize("case", CASES)
async def test_a_nullable_list_of_boxes_answers_as_graphql_core(case: str, selection: str) -> None:
    expected, actual = await both(
        f"query($cases: [String!]!) {{ boxes(cases: $cases) {{ {selection} }} }}",
        {"cases": ["good", case, "good"]},
    )
    assert actual == expected


@pytest.mark.parametrize("selection", [SELECTION, PLAIN_SELECTION], ids=["guarded", "plain"])
@pytest.mark.parametrize("case", CASES)
async def test_a_non_null_box_answers_as_graphql_core(case: str, selection: str) -> None:
    expected, actual = await both(
        f"query($case: String!) {{ strict(case: $case) {{ {selection} }} }}", {"case": case}
    )
    assert actual == expected


async def test_a_plain_selection_is_completed_by_its_compiled_plan() -> None:
    """Not by graphql-core's field-by-field path: the plan is what makes a page fast."""
    _, fast = schemas()
    executor = cast("type[PlainFieldExecutionContext]", fast.execution_context_class)
    executed: list[str] = []
    original = executor.execute_field

    def counted(self: Any, parent_type: Any, *args: Any, **kwargs: Any) -> Any:
        executed.append(parent_type.name)
        return original(self, parent_type, *args, **kwargs)

    executor.execute_field = counted  # type: ignore[method-assign]
    result = await fast.execute(
        '{ strict(case: "good") { leaves { name } leaf { name __typename } } }'
    )
    assert result.errors is None
    assert result.data == {
        "strict": {
            "leaves": [{"name": "good"}, {"name": "second"}],
            "leaf": {"name": "good", "__typename": "Leaf"},
        }
    }
    assert executed == ["Query"]


async def test_skip_and_include_answer_as_graphql_core() -> None:
    expected, actual = await both(
        'query($yes: Boolean!) { boxes(cases: ["good"]) {'
        " label @include(if: $yes) leaf @skip(if: $yes) { name } leaves { name @skip(if: $yes) }"
        " } }",
        {"yes": True},
    )
    assert actual == expected
    assert json.loads(actual)["data"] == {"boxes": [{"label": "good", "leaves": [{}, {}]}]}


def test_plain_fields_are_the_ones_without_resolvers() -> None:
    _, fast = schemas()
    context = fast.execution_context_class
    assert issubclass(context, PlainFieldExecutionContext)
    plain = cast("type[PlainFieldExecutionContext]", context).plain_fields
    assert set(plain["Box"]) == {
        "label",
        "leaf",
        "maybe",
        "leaves",
        "loose",
        "count",
    }
    assert set(plain["Leaf"]) == {"name", "note"}  # not `checked`
    assert "Query" not in plain


# The service itself, with strawberry's executor next to it.


@pytest.fixture(scope="session")
async def stock_graphql_url(service_settings: Settings) -> AsyncIterator[str]:
    app = create_app(service_settings)
    app.state.graphql_schema.execution_context_class = STOCK_EXECUTION_CONTEXT
    async with run_http_server(app) as base_url:
        yield f"{base_url}/graphql"


async def answers(
    stock_url: str,
    url: str,
    query: str,
    variables: dict[str, Any],
    headers: dict[str, str] | None = None,
) -> tuple[Answer, Answer]:
    expected = await ask(stock_url, query, variables, headers=headers)
    actual = await ask(url, query, variables, headers=headers)
    return expected, actual


async def product_with_variants(engine: AsyncEngine, tag: str) -> int:
    product = await make_product(engine, tags=[tag], price="12.50", sale_price="9.99")
    await make_variant(engine, product, price="11.00", stock=0)
    await make_variant(engine, product, stock=4)
    return product


async def test_a_product_page_answers_as_graphql_core(
    graphql_url: str, stock_graphql_url: str, db_engine: AsyncEngine
) -> None:
    tag = "exec-page"
    for _ in range(3):
        await product_with_variants(db_engine, tag)
    query = """
    query($tag: String!) {
      products(filter: {tags: [$tag]}, page: {first: 2}) {
        __typename totalCount
        edges { cursor node { __typename id name price
          pricing { basePrice salePrice currency }
          variants { id sku name price inStock }
          ...on Product { other: variants { sku } } } }
        pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
      }
    }"""
    expected, actual = await answers(stock_graphql_url, graphql_url, query, {"tag": tag})
    assert actual.errors == expected.errors == []
    assert as_sent(actual.data, []) == as_sent(expected.data, [])
    assert len(actual.data["products"]["edges"][0]["node"]["variants"]) == 2


async def test_a_guarded_field_refused_inside_lists_answers_as_graphql_core(
    graphql_url: str, stock_graphql_url: str, db_engine: AsyncEngine
) -> None:
    tag = "exec-guarded"
    await product_with_variants(db_engine, tag)
    query = """
    query($tag: String!) {
      products(filter: {tags: [$tag]}) { edges { node { name variants { sku stock } } } }
    }"""
    expected, actual = await answers(stock_graphql_url, graphql_url, query, {"tag": tag})
    assert actual.codes == ["UNAUTHENTICATED", "UNAUTHENTICATED"]
    assert as_sent(actual.data, actual.errors) == as_sent(expected.data, expected.errors)


async def test_variants_fetched_through_node_answer_as_graphql_core(
    graphql_url: str,
    stock_graphql_url: str,
    db_engine: AsyncEngine,
    service_settings: Settings,
) -> None:
    first = await product_with_variants(db_engine, "exec-node")
    second = await product_with_variants(db_engine, "exec-node")
    manager = await make_user(db_engine, role="manager")
    query = """
    query($a: ID!, $b: ID!) {
      a: node(id: $a) { id ... on Product { variants { sku stock price } } }
      b: product(id: $b) { name variants { sku inStock } }
    }"""
    variables = {"a": global_id("Product", first), "b": global_id("Product", second)}
    expected, actual = await answers(
        stock_graphql_url,
        graphql_url,
        query,
        variables,
        headers=bearer_for(service_settings, manager, "manager"),
    )
    assert actual.errors == expected.errors == []
    assert as_sent(actual.data, []) == as_sent(expected.data, [])
    assert [v["stock"] for v in actual.data["a"]["variants"]] == [0, 4]


def test_string_id_and_boolean_values_of_their_type_skip_coercion() -> None:
    """graphql-core gives such values back unchanged, so the plan does not call it for them."""
    _, fast = schemas()
    plain = cast("type[PlainFieldExecutionContext]", fast.execution_context_class).plain_fields
    name, count = plain["Leaf"]["name"], plain["Box"]["count"]
    assert isinstance(name, PlainLeaf)
    assert isinstance(count, PlainLeaf)
    assert name.unchanged is str
    assert count.unchanged is None  # Int: graphql-core checks its range
