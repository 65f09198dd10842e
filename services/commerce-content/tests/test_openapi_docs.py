"""Every operation of the service documents itself: a summary, a description, and examples
of its request body and of its success response (issue 14, defect 5)."""

from __future__ import annotations

from typing import Any

import httpx

# Operations servicekit mounts (probes and API keys) are documented there.
KIT_PATHS = ("/healthz", "/readyz", "/api/v1/api-keys")


def _has_example(content: dict[str, Any]) -> bool:
    return any("example" in media or "examples" in media for media in content.values())


def missing_documentation(document: dict[str, Any]) -> list[str]:
    missing = []
    for path, operations in document["paths"].items():
        if path.startswith(KIT_PATHS):
            continue
        for method, operation in operations.items():
            name = f"{method.upper()} {path}"
            for part in ("summary", "description"):
                if not operation.get(part, "").strip():
                    missing.append(f"{name}: {part}")
            body = operation.get("requestBody")
            if body is not None and not _has_example(body.get("content", {})):
                missing.append(f"{name}: request example")
            for status, response in operation["responses"].items():
                content = response.get("content")
                if status.startswith("2") and content and not _has_example(content):
                    missing.append(f"{name}: {status} example")
    return missing


async def test_every_operation_has_a_summary_a_description_and_examples(
    client: httpx.AsyncClient,
) -> None:
    document = (await client.get("/openapi.json")).json()
    assert missing_documentation(document) == []


async def test_the_checkout_example_spells_the_address_in_camel_case(
    client: httpx.AsyncClient,
) -> None:
    document = (await client.get("/openapi.json")).json()
    checkout = document["paths"]["/api/orders/checkout"]["post"]
    example = checkout["requestBody"]["content"]["application/json"]["example"]
    assert example["shippingAddress"]["postalCode"]
    assert example["items"][0]["productId"].isdigit()


def test_an_operation_without_examples_is_reported() -> None:
    document = {
        "paths": {
            "/api/x": {
                "post": {
                    "summary": "X",
                    "description": "",
                    "requestBody": {"content": {"application/json": {"schema": {}}}},
                    "responses": {"200": {"content": {"application/json": {"schema": {}}}}},
                }
            }
        }
    }
    assert missing_documentation(document) == [
        "POST /api/x: description",
        "POST /api/x: request example",
        "POST /api/x: 200 example",
    ]
