"""The committed SDL, the spec's shapes in it, and what production mode turns off."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from commerce_content.app import create_app
from commerce_content.settings import Settings
from graphql import build_schema
from pydantic import SecretStr
from servicekit.testing import run_http_server

from tests.graphql_client import ask

SCHEMA_FILE = Path(__file__).resolve().parents[1] / "schema.graphql"
INTROSPECTION = "{ __schema { queryType { name } } }"


async def test_the_committed_sdl_matches_the_served_schema(graphql_url: str) -> None:
    """Regenerate with `commerce-content graphql-schema --write` after changing the schema."""
    answer = await ask(
        graphql_url,
        "{ __schema { types { name } } }",
    )
    served = {t["name"] for t in answer.data["__schema"]["types"]}
    committed = build_schema(SCHEMA_FILE.read_text(encoding="utf-8"))
    assert served == set(committed.type_map)


def test_the_committed_sdl_is_exactly_what_the_code_builds(service_settings: Settings) -> None:
    from commerce_content.graphql_api.schema import build_schema as build_ours

    assert build_ours(service_settings).as_str() + "\n" == SCHEMA_FILE.read_text(encoding="utf-8")


def test_the_spec_shapes_are_in_the_sdl() -> None:
    schema = build_schema(SCHEMA_FILE.read_text(encoding="utf-8"))
    query = schema.query_type
    assert query is not None
    assert str(query.fields["node"].type) == "Node"
    assert str(query.fields["product"].type) == "Product"
    assert str(query.fields["products"].type) == "ProductConnection!"
    assert set(query.fields["products"].args) == {"filter", "page"}
    assert str(query.fields["viewer"].type) == "User"
    connection = schema.get_type("ProductConnection")
    assert {n: str(f.type) for n, f in connection.fields.items()} == {  # type: ignore[union-attr]
        "edges": "[ProductEdge!]!",
        "pageInfo": "PageInfo!",
        "totalCount": "Int!",
    }
    product = schema.get_type("Product")
    price = product.fields["price"]  # type: ignore[union-attr]
    assert str(price.type) == "Decimal"
    assert price.deprecation_reason
    assert "pricing.basePrice" in price.deprecation_reason
    assert str(schema.get_type("UserError").fields["code"].type) == "OrderErrorCode"  # type: ignore[union-attr]
    assert list(schema.get_type("Role").values) == ["ADMIN", "MANAGER", "USER", "GUEST"]  # type: ignore[union-attr]
    assert {d.name for d in schema.directives} >= {
        "auth",
        "rateLimit",
        "cacheControl",
        "deprecated",
    }


@pytest.fixture(scope="module")
async def production_url(service_settings: Settings) -> AsyncIterator[str]:
    settings = service_settings.model_copy(
        update={
            "env": "production",
            "jwt_secret": SecretStr("a-production-secret-of-enough-length-1"),
        }
    )
    async with run_http_server(create_app(settings)) as base_url:
        yield f"{base_url}/graphql"


async def test_production_refuses_introspection(production_url: str) -> None:
    answer = await ask(production_url, INTROSPECTION)
    assert answer.data is None
    assert "introspection" in answer.errors[0]["message"].lower()


async def test_production_serves_no_graphiql(production_url: str) -> None:
    async with httpx.AsyncClient() as http:
        response = await http.get(production_url, headers={"accept": "text/html"})
    assert response.status_code == 400
    assert response.headers["content-type"] == "application/json"


async def test_production_still_answers_queries(production_url: str) -> None:
    answer = await ask(production_url, "{ products(page: {first: 1}) { edges { cursor } } }")
    assert answer.errors == []


async def test_development_allows_introspection(graphql_url: str) -> None:
    answer = await ask(graphql_url, INTROSPECTION)
    assert answer.data == {"__schema": {"queryType": {"name": "Query"}}}
