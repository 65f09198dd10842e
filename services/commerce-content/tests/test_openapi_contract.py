"""What the OpenAPI document says matches what the API does (issue 13, finding 21)."""

from __future__ import annotations

import httpx


async def test_the_search_type_is_declared_as_an_enum(client: httpx.AsyncClient) -> None:
    schema = (await client.get("/openapi.json")).json()
    parameters = schema["paths"]["/api/search"]["get"]["parameters"]
    declared = next(p for p in parameters if p["name"] == "type")["schema"]
    assert declared["enum"] == ["all", "posts", "products", "pages"]


async def test_an_unknown_search_type_is_400(client: httpx.AsyncClient) -> None:
    response = await client.get("/api/search?q=abc&type=users")
    assert response.status_code == 400


async def test_bodies_read_by_hand_are_documented_as_bounded(client: httpx.AsyncClient) -> None:
    schema = (await client.get("/openapi.json")).json()
    for path in ("/api/contact", "/api/orders/checkout", "/api/admin-action", "/graphql"):
        responses = schema["paths"][path]["post"]["responses"]
        assert "413" in responses, path
        assert "not UTF-8" in responses["400"]["description"], path


async def test_the_article_sort_and_order_are_declared_as_enums(client: httpx.AsyncClient) -> None:
    schema = (await client.get("/openapi.json")).json()
    parameters = {p["name"]: p for p in schema["paths"]["/api/v1/articles"]["get"]["parameters"]}
    assert "published_at" in str(parameters["sort"]["schema"]["enum"])
    assert parameters["order"]["schema"]["enum"] == ["asc", "desc"]
