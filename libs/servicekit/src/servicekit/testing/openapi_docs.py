"""What a reader of an OpenAPI document needs from every operation: a summary, a description,
an example of the request body it takes and of every response with a body, errors included. One check for
the three services' documents (and any later one)."""

from __future__ import annotations

from typing import Any

_METHODS = ("get", "put", "post", "patch", "delete")


def _resolve(document: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        schema = document["components"]["schemas"][name]
    return schema


def _schema_has_example(document: dict[str, Any], schema: dict[str, Any]) -> bool:
    schema = _resolve(document, schema)
    if "example" in schema or schema.get("examples"):
        return True
    if schema.get("type") == "array" and "items" in schema:
        return _schema_has_example(document, schema["items"])
    # `X | None` bodies: an example on the model is enough.
    return any(_schema_has_example(document, s) for s in schema.get("anyOf", []) if s)


def _media_has_example(document: dict[str, Any], media: dict[str, Any]) -> bool:
    if "example" in media or media.get("examples"):
        return True
    return _schema_has_example(document, media.get("schema", {}))


def undocumented_operations(document: dict[str, Any]) -> list[str]:
    """One line per gap, e.g. `POST /things: no request example`; empty when none."""
    gaps: list[str] = []
    for path, item in document["paths"].items():
        for method in _METHODS:
            operation = item.get(method)
            if operation is None:
                continue
            name = f"{method.upper()} {path}"
            if not operation.get("summary"):
                gaps.append(f"{name}: no summary")
            if not operation.get("description"):
                gaps.append(f"{name}: no description")
            body = operation.get("requestBody", {}).get("content", {})
            for media_type, media in body.items():
                if not _media_has_example(document, media):
                    gaps.append(f"{name}: no request example ({media_type})")
            for status, response in operation.get("responses", {}).items():
                for media_type, media in response.get("content", {}).items():
                    if not _media_has_example(document, media):
                        gaps.append(f"{name}: no example of its {status} response ({media_type})")
    return gaps
