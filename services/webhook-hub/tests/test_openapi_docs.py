"""Every webhook-hub operation documents itself (issue 14): a summary, a description, an
example of its request body when it takes one, an example of its success response, and the
errors it can raise with their codes."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

# Operations servicekit mounts in every service (key management, health): documented there.
SHARED_PREFIXES = ("/webhooks/api-keys", "/healthz", "/readyz", "/metrics")
METHODS = {"get", "post", "put", "patch", "delete"}


def resolve(document: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        schema = document["components"]["schemas"][name]
    return schema


def has_example(document: dict[str, Any], content: dict[str, Any]) -> bool:
    media = content.get("application/json", {})
    if "example" in media or "examples" in media:
        return True
    schema = resolve(document, media.get("schema", {}))
    return bool(schema.get("examples") or schema.get("example"))


def hub_operations(document: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (method.upper(), path, operation)
        for path, item in document["paths"].items()
        if not path.startswith(SHARED_PREFIXES)
        for method, operation in item.items()
        if method in METHODS
    ]


@pytest.fixture
async def openapi(client: httpx.AsyncClient) -> dict[str, Any]:
    response = await client.get("/openapi.json")
    assert response.status_code == 200
    document: dict[str, Any] = response.json()
    return document


async def test_the_walk_covers_every_hub_operation(openapi: dict[str, Any]) -> None:
    found = {(method, path) for method, path, _ in hub_operations(openapi)}
    assert ("POST", "/webhooks/subscriptions") in found
    assert ("PATCH", "/webhooks/event-types/{name}") in found
    assert len(found) >= 15


async def test_every_operation_has_a_summary_and_a_description(openapi: dict[str, Any]) -> None:
    missing = [
        f"{method} {path}"
        for method, path, operation in hub_operations(openapi)
        if not operation.get("summary") or not operation.get("description")
    ]
    assert missing == []


async def test_every_request_body_has_an_example(openapi: dict[str, Any]) -> None:
    missing = [
        f"{method} {path}"
        for method, path, operation in hub_operations(openapi)
        if "requestBody" in operation
        and not has_example(openapi, operation["requestBody"]["content"])
    ]
    assert missing == []


async def test_every_success_response_has_an_example(openapi: dict[str, Any]) -> None:
    missing = []
    for method, path, operation in hub_operations(openapi):
        successes = {code: r for code, r in operation["responses"].items() if code.startswith("2")}
        assert successes, f"{method} {path} declares no success response"
        for code, response in successes.items():
            if "content" in response and not has_example(openapi, response["content"]):
                missing.append(f"{method} {path} {code}")
    assert missing == []


async def test_error_responses_name_their_codes_with_an_example(openapi: dict[str, Any]) -> None:
    operation = openapi["paths"]["/webhooks/subscriptions"]["post"]
    unprocessable = operation["responses"]["422"]
    assert "`unknown_event_types`" in unprocessable["description"]
    examples = unprocessable["content"]["application/json"]["examples"]
    assert examples["unknown_event_types"]["value"]["invalid_events"] == ["order.piad"]
    assert "`subscription_limit_reached`" in operation["responses"]["409"]["description"]
