"""Every webhook-hub operation documents itself (issue 14): a summary, a description, an
example of its request body when it takes one, an example of its success response, and the
errors it can raise with their codes."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from servicekit.testing.openapi_docs import undocumented_operations


@pytest.fixture
async def openapi(client: httpx.AsyncClient) -> dict[str, Any]:
    response = await client.get("/openapi.json")
    assert response.status_code == 200
    document: dict[str, Any] = response.json()
    return document


async def test_the_document_covers_every_hub_operation(openapi: dict[str, Any]) -> None:
    paths = openapi["paths"]
    assert "post" in paths["/webhooks/subscriptions"]
    assert "patch" in paths["/webhooks/event-types/{name}"]
    assert sum(len(item) for item in paths.values()) >= 15


async def test_every_operation_has_a_description_and_examples(openapi: dict[str, Any]) -> None:
    assert undocumented_operations(openapi) == []


async def test_error_responses_name_their_codes_with_an_example(openapi: dict[str, Any]) -> None:
    operation = openapi["paths"]["/webhooks/subscriptions"]["post"]
    unprocessable = operation["responses"]["422"]
    assert "`unknown_event_types`" in unprocessable["description"]
    examples = unprocessable["content"]["application/json"]["examples"]
    assert examples["unknown_event_types"]["value"]["invalid_events"] == ["order.piad"]
    assert "`subscription_limit_reached`" in operation["responses"]["409"]["description"]
