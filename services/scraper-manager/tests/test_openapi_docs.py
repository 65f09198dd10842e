"""Every operation of scraper-manager's API documents itself: a summary, a description, and
an example of its request body and of every response that has a body."""

from __future__ import annotations

import httpx
import pytest
from servicekit.testing.openapi_docs import undocumented_operations

# Routers of this service (servicekit's own operations are checked in servicekit too).
OWN_TAGS = {"scrapers", "runs", "webhooks", "oauth"}


async def test_the_document_covers_every_scraper_manager_operation(
    client: httpx.AsyncClient,
) -> None:
    spec = (await client.get("/openapi.json")).json()
    own = [op for ops in spec["paths"].values() for op in ops.values()]
    assert sum(1 for op in own if OWN_TAGS & set(op.get("tags", []))) >= 15


async def test_every_operation_has_a_summary_description_and_examples(
    client: httpx.AsyncClient,
) -> None:
    assert undocumented_operations((await client.get("/openapi.json")).json()) == []


@pytest.mark.parametrize("status", ["400", "401", "403", "404", "409", "422", "503"])
async def test_error_examples_are_in_the_flat_envelope(
    client: httpx.AsyncClient, status: str
) -> None:
    spec = (await client.get("/openapi.json")).json()
    examples = [
        example["value"]
        for ops in spec["paths"].values()
        for op in ops.values()
        if OWN_TAGS & set(op.get("tags", [])) and status in op["responses"]
        for example in op["responses"][status]
        .get("content", {})
        .get("application/json", {})
        .get("examples", {})
        .values()
    ]
    assert examples
    assert all(set(e) >= {"error", "code"} for e in examples)
