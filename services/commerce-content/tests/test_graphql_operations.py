"""Operation-wide behaviour of /graphql: Cache-Control from @cacheControl, @rateLimit, depth,
alias, token and cost limits, transport rules (GET for queries only)."""

from __future__ import annotations

import asyncio

import httpx
from commerce_content.app import create_app
from commerce_content.graphql_api.adapter import core_schema
from commerce_content.graphql_api.analysis import OperationAnalyzer, operation_variables
from commerce_content.graphql_api.extensions import OperationAnalyses
from commerce_content.graphql_api.schema import build_schema
from commerce_content.settings import Settings
from graphql import OperationDefinitionNode, parse
from servicekit.testing import run_http_server
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.factories import bearer_for, make_product, make_user
from tests.graphql_client import ask, global_id

PUBLIC = "{ products(page: {first: 2}) { edges { node { name pricing { basePrice } } } } }"
PRIVATE = "{ viewer { name } }"


async def user_headers(
    engine: AsyncEngine, settings: Settings, role: str = "user"
) -> dict[str, str]:
    return bearer_for(settings, await make_user(engine, role), role)


async def test_a_public_query_is_cacheable_by_anyone_for_its_shortest_max_age(
    graphql_url: str,
) -> None:
    answer = await ask(graphql_url, PUBLIC)
    # products 60 s, pricing 30 s: the minimum wins.
    assert answer.headers["cache-control"] == "max-age=30, public"
    assert answer.headers["vary"] == "Authorization"


async def test_a_private_query_is_cacheable_by_the_caller_only(
    graphql_url: str, db_engine: AsyncEngine, service_settings: Settings
) -> None:
    answer = await ask(
        graphql_url, PRIVATE, headers=await user_headers(db_engine, service_settings)
    )
    assert answer.headers["cache-control"] == "max-age=30, private"


async def test_a_mixed_query_takes_the_minimum_and_private_wins(
    graphql_url: str, db_engine: AsyncEngine, service_settings: Settings
) -> None:
    answer = await ask(
        graphql_url,
        "{ products(page: {first: 1}) { edges { node { name } } } viewer { name } }",
        headers=await user_headers(db_engine, service_settings),
    )
    assert answer.headers["cache-control"] == "max-age=30, private"


async def test_fields_without_a_hint_make_the_answer_uncacheable(
    graphql_url: str, db_engine: AsyncEngine
) -> None:
    product = await make_product(db_engine)
    answer = await ask(
        graphql_url,
        "query($id: ID!) { node(id: $id) { id } }",
        {"id": global_id("Product", product)},
    )
    assert answer.headers["cache-control"] == "no-store"


async def test_no_cache_header_when_the_response_has_errors(graphql_url: str) -> None:
    answer = await ask(
        graphql_url, PUBLIC.replace("{ products", "{ dashboardStats { ordersPaid } products")
    )
    assert answer.codes == ["UNAUTHENTICATED"]
    assert "cache-control" not in answer.headers


async def test_mutations_carry_no_cache_header(graphql_url: str) -> None:
    answer = await ask(graphql_url, 'mutation { deleteProduct(id: "x") { deletedId } }')
    assert "cache-control" not in answer.headers


async def test_queries_over_get_carry_the_cache_header(graphql_url: str) -> None:
    async with httpx.AsyncClient() as http:
        response = await http.get(graphql_url, params={"query": PUBLIC})
    assert response.status_code == 200
    assert response.headers["cache-control"] == "max-age=30, public"
    assert response.json()["data"]["products"]["edges"] is not None


async def test_mutations_over_get_are_405(graphql_url: str) -> None:
    async with httpx.AsyncClient() as http:
        response = await http.get(
            graphql_url, params={"query": 'mutation { deleteProduct(id: "x") { deletedId } }'}
        )
    assert response.status_code == 405
    assert response.headers["allow"] == "POST"
    assert response.json()["errors"][0]["message"] == "Mutations must be sent with POST"


async def test_a_body_that_is_not_a_graphql_request_is_400(graphql_url: str) -> None:
    async with httpx.AsyncClient() as http:
        not_json = await http.post(
            graphql_url, content=b"{", headers={"content-type": "application/json"}
        )
        no_query = await http.post(graphql_url, json={"variables": {}})
        bad_variables = await http.get(graphql_url, params={"query": PUBLIC, "variables": "[1]"})
    assert [r.status_code for r in (not_json, no_query, bad_variables)] == [400, 400, 400]
    assert all(
        r.json()["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT"
        for r in (not_json, no_query, bad_variables)
    )


CHECKOUT_NOTHING = "mutation { createOrder(input: {items: []}) { userErrors { message } } }"


async def test_rate_limit_trips_and_recovers(
    graphql_url: str, db_engine: AsyncEngine, service_settings: Settings
) -> None:
    headers = await user_headers(db_engine, service_settings)
    for _ in range(5):  # createOrder allows 5 per 10 s per caller
        allowed = await ask(graphql_url, CHECKOUT_NOTHING, headers=headers)
        assert allowed.errors == []
    limited = await ask(graphql_url, CHECKOUT_NOTHING, headers=headers)
    assert limited.codes == ["RATE_LIMITED"]
    retry_after = limited.errors[0]["extensions"]["retryAfter"]
    assert 1 <= retry_after <= 10
    # Another caller is counted separately.
    other = await ask(
        graphql_url, CHECKOUT_NOTHING, headers=await user_headers(db_engine, service_settings)
    )
    assert other.errors == []
    await asyncio.sleep(retry_after + 0.2)
    recovered = await ask(graphql_url, CHECKOUT_NOTHING, headers=headers)
    assert recovered.errors == []


async def test_depth_beyond_the_limit_is_refused(service_settings: Settings) -> None:
    # The schema has no cycles, so the limit is tried on a server configured with a low one.
    shallow = service_settings.model_copy(update={"graphql_max_depth": 3})
    async with run_http_server(create_app(shallow)) as base_url:
        url = f"{base_url}/graphql"
        assert (await ask(url, "{ products { edges { cursor } } }")).errors == []
        answer = await ask(url, "{ products { edges { node { pricing { basePrice } } } } }")
    assert answer.data is None
    assert "exceeds maximum operation depth of 3" in answer.errors[0]["message"]


async def test_too_many_aliases_are_refused(graphql_url: str) -> None:
    query = "{ " + " ".join(f"a{i}: viewer {{ id }}" for i in range(16)) + " }"
    answer = await ask(graphql_url, query)
    assert answer.data is None
    assert "aliases" in answer.errors[0]["message"]


async def test_too_many_tokens_are_refused(graphql_url: str) -> None:
    query = "{ viewer { " + " ".join(["id"] * 2100) + " } }"
    answer = await ask(graphql_url, query)
    assert answer.data is None
    assert "token" in answer.errors[0]["message"].lower()


async def test_cost_is_reported_and_capped(graphql_url: str) -> None:
    cheap = await ask(graphql_url, PUBLIC)
    assert cheap.extensions is not None
    assert cheap.extensions["cost"] == {"requestedQueryCost": 7, "maximumAvailable": 1000}
    costly = "{ products(page: {first: 100}) { edges { node { variants { id } pricing { basePrice } } } } }"
    answer = await ask(graphql_url, costly)
    assert answer.data is None
    assert answer.codes == ["MAX_COST_EXCEEDED"]
    assert answer.errors[0]["extensions"]["cost"] == 1 + 100 * (1 + 1 + 10 + 1)


async def test_variables_count_towards_the_cost(graphql_url: str) -> None:
    query = "query($n: Int) { products(page: {first: $n}) { edges { node { variants { id } } } } }"
    small = await ask(graphql_url, query, {"n": 5})
    assert small.extensions is not None
    assert small.extensions["cost"]["requestedQueryCost"] == 1 + 5 * (1 + 1 + 10)
    answer = await ask(graphql_url, query, {"n": 100})
    assert answer.codes == ["MAX_COST_EXCEEDED"]


VARIANT_PAGE = "edges { node { variants { id } } }"


def test_the_cost_reads_supplied_variables_else_their_defaults() -> None:
    operation = parse("query($a: Int = 5, $b: Int = 7, $c: Int, $d: Int = 9) { __typename }")
    definition = operation.definitions[0]
    assert isinstance(definition, OperationDefinitionNode)
    assert operation_variables(definition, {"a": 1, "b": None}) == {"a": 1, "b": None, "d": 9}
    assert operation_variables(definition, None) == {"a": 5, "b": 7, "d": 9}


async def test_a_variables_default_counts_towards_the_cost(graphql_url: str) -> None:
    query = f"query($n: Int = 2) {{ products(page: {{first: $n}}) {{ {VARIANT_PAGE} }} }}"
    small = await ask(graphql_url, query)
    assert small.extensions is not None
    assert small.extensions["cost"]["requestedQueryCost"] == 1 + 2 * (1 + 1 + 10)
    aliased = " ".join(
        f"a{i}: products(page: {{first: $n}}) {{ {VARIANT_PAGE} }}" for i in range(4)
    )
    answer = await ask(graphql_url, f"query($n: Int = 100) {{ {aliased} }}")
    assert answer.codes == ["MAX_COST_EXCEEDED"]
    assert answer.errors[0]["extensions"]["cost"] == 4 * (1 + 100 * (1 + 1 + 10))


async def test_a_supplied_variable_wins_over_its_default_in_the_cost(graphql_url: str) -> None:
    query = f"query($n: Int = 100) {{ products(page: {{first: $n}}) {{ {VARIANT_PAGE} }} }}"
    small = await ask(graphql_url, query, {"n": 3})
    assert small.extensions is not None
    assert small.extensions["cost"]["requestedQueryCost"] == 1 + 3 * (1 + 1 + 10)
    # An explicit null is no count: the page's default size of 20.
    unset = await ask(graphql_url, query, {"n": None})
    assert unset.extensions is not None
    assert unset.extensions["cost"]["requestedQueryCost"] == 1 + 20 * (1 + 1 + 10)


async def test_an_input_object_variable_and_its_default_count_towards_the_cost(
    graphql_url: str,
) -> None:
    query = (
        "query($page: PaginationInput = {first: 100})"
        f" {{ products(page: $page) {{ {VARIANT_PAGE} }} }}"
    )
    by_default = await ask(graphql_url, query)
    assert by_default.codes == ["MAX_COST_EXCEEDED"]
    assert by_default.errors[0]["extensions"]["cost"] == 1 + 100 * (1 + 1 + 10)
    supplied = await ask(graphql_url, query, {"page": {"last": 4}})
    assert supplied.extensions is not None
    assert supplied.extensions["cost"]["requestedQueryCost"] == 1 + 4 * (1 + 1 + 10)


async def test_graphiql_is_served_to_browsers_in_development(graphql_url: str) -> None:
    async with httpx.AsyncClient() as http:
        response = await http.get(graphql_url, headers={"accept": "text/html"})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert "graphiql" in response.text.lower()


async def test_unexpected_failures_are_masked_in_the_errors_array(
    service_settings: Settings,
) -> None:
    # A real failure: the database this server points at does not exist.
    broken = service_settings.model_copy(
        update={"database_url": service_settings.database_url.rsplit("/", 1)[0] + "/missing_db"}
    )
    async with run_http_server(create_app(broken)) as base_url:
        answer = await ask(f"{base_url}/graphql", "{ products { totalCount } }")
    assert answer.data is None
    [error] = answer.errors
    assert error["message"] == "Unexpected error."  # nothing of the database's own words
    assert error["path"] == ["products"]
    assert error["extensions"] == {"code": "INTERNAL_SERVER_ERROR"}
    assert set(error) == {"message", "locations", "path", "extensions"}


PAGE = "query($n: Int) { products(page: {first: $n}) { edges { node { id } } } }"


def test_an_operation_with_the_same_variables_is_analysed_once(
    service_settings: Settings,
) -> None:
    analyzer = OperationAnalyzer(core_schema(build_schema(service_settings)))
    analyses = OperationAnalyses()
    document = parse(PAGE)
    first = analyses.of(analyzer, document, None, {"n": 5})
    assert analyses.of(analyzer, document, None, {"n": 5}) is first
    assert analyses.of(analyzer, document, None, {"n": 6}) is not first
    assert analyses.of(analyzer, parse(PAGE), None, {"n": 5}) is not first


def test_the_analyses_keep_only_the_most_recently_used(service_settings: Settings) -> None:
    analyzer = OperationAnalyzer(core_schema(build_schema(service_settings)))
    analyses = OperationAnalyses(capacity=2)
    document = parse(PAGE)
    first = analyses.of(analyzer, document, None, {"n": 1})
    analyses.of(analyzer, document, None, {"n": 2})
    analyses.of(analyzer, document, None, {"n": 3})
    assert analyses.of(analyzer, document, None, {"n": 1}) is not first
