"""Every operation of scraper-manager's API documents itself: a summary, a description, and
an example of its request body and of every response that has a body."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

# Routers of this service; /healthz, /readyz and /api/v1/api-keys come from servicekit.
OWN_TAGS = {"scrapers", "runs", "webhooks", "oauth"}


def _resolve(spec: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = spec["components"]["schemas"][schema["$ref"].rsplit("/", 1)[-1]]
    return schema


def _has_example(spec: dict[str, Any], media: dict[str, Any]) -> bool:
    if media.get("example") is not None or media.get("examples"):
        return True
    schema = _resolve(spec, media.get("schema", {}))
    if schema.get("examples") or schema.get("example") is not None:
        return True
    items = schema.get("items")
    return items is not None and bool(_resolve(spec, items).get("examples"))


def missing_docs(spec: dict[str, Any], op: dict[str, Any]) -> list[str]:
    missing = [key for key in ("summary", "description") if not op.get(key)]
    for media_type, media in op.get("requestBody", {}).get("content", {}).items():
        if not _has_example(spec, media):
            missing.append(f"request example ({media_type})")
    for status, response in op["responses"].items():
        for media_type, media in response.get("content", {}).items():
            if not _has_example(spec, media):
                missing.append(f"{status} example ({media_type})")
    return missing


async def test_every_operation_has_a_summary_description_and_examples(
    client: httpx.AsyncClient,
) -> None:
    spec = (await client.get("/openapi.json")).json()
    own = [
        (method.upper(), path, op)
        for path, ops in spec["paths"].items()
        for method, op in ops.items()
        if OWN_TAGS & set(op.get("tags", []))
    ]
    assert len(own) >= 15
    gaps = {f"{method} {path}": missing_docs(spec, op) for method, path, op in own}
    assert {op: gap for op, gap in gaps.items() if gap} == {}


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
