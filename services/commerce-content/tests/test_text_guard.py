"""The probes of issue 13 (M1) against commerce-content: text PostgreSQL cannot store, and JSON
nested 20,000 deep, are a 400 in the envelope of the path (the generic cases are in the
conformance tests)."""

from __future__ import annotations

import httpx
import pytest

DEEP = b"[" * 20_000 + b"]" * 20_000


async def test_a_nul_in_the_search_query_is_400(client: httpx.AsyncClient) -> None:
    response = await client.get("/api/search?q=a%00b")
    assert response.status_code == 400
    assert "NUL" in response.json()["error"]


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/contact", b'{"name": "x", "email": "a@example.com", "message": ' + DEEP + b"}"),
        ("/api/orders/checkout", b'{"items": ' + DEEP + b"}"),
        ("/graphql", b'{"query": "{ __typename }", "variables": {"a": ' + DEEP + b"}}"),
        ("/api/admin-action", b'{"action": ' + DEEP + b"}"),
    ],
)
async def test_json_nested_20000_deep_is_400(
    client: httpx.AsyncClient, path: str, body: bytes
) -> None:
    response = await client.post(path, content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 400
    assert "nested" in str(response.json())


@pytest.mark.parametrize("path", ["/api/contact", "/api/orders/checkout", "/graphql"])
@pytest.mark.parametrize("content_type", ["text/plain", None])
async def test_json_nested_deep_under_another_label_is_400(
    client: httpx.AsyncClient, path: str, content_type: str | None
) -> None:
    # These endpoints read their JSON whatever the label, so the guard may not trust it.
    # httpx sets no Content-Type for raw bytes unless told.
    headers = {"Content-Type": content_type} if content_type else {}
    response = await client.post(path, content=b'{"items": ' + DEEP + b"}", headers=headers)
    assert response.status_code == 400
    assert "nested" in str(response.json())


async def test_graphql_variables_nested_deep_in_the_query_string_are_bad_user_input(
    client: httpx.AsyncClient,
) -> None:
    response = await client.get(
        "/graphql",
        params={"query": "{ __typename }", "variables": "[" * 2_000 + "]" * 2_000},
        headers={"Accept": "application/json"},
    )
    assert response.status_code == 400
    [error] = response.json()["errors"]
    assert error["extensions"]["code"] == "BAD_USER_INPUT"
    assert "nested" in error["message"]


async def test_a_lone_surrogate_in_an_article_is_400(
    client: httpx.AsyncClient, admin_key_headers: dict[str, str]
) -> None:
    response = await client.post(
        "/api/v1/articles",
        content=b'{"title": "\\ud800", "body": "x"}',
        headers={**admin_key_headers, "Content-Type": "application/json"},
    )
    assert response.status_code == 400
    assert "surrogate" in response.json()["error"]["message"]


async def test_a_nul_in_a_graphql_variable_is_bad_user_input(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/graphql",
        content=b'{"query": "query($q: String) { __typename }", "variables": {"q": "a\\u0000"}}',
        headers={"Content-Type": "application/json"},
    )
    assert response.status_code == 400
    [error] = response.json()["errors"]
    assert error["extensions"]["code"] == "BAD_USER_INPUT"
    assert "NUL" in error["message"]
