"""Each operation's OpenAPI text and examples, in one form: `**documented(...)` in the route
decorator gives its summary, description, request body example (with a schema for bodies
read by hand) and success example."""

from __future__ import annotations

from typing import Any

JSON = "application/json"


def documented(
    summary: str,
    description: str,
    *,
    response: Any = None,
    status: int = 200,
    request: Any = None,
    request_schema: dict[str, Any] | None = None,
    media_types: tuple[str, ...] = (JSON,),
) -> dict[str, Any]:
    """Route keyword arguments; `responses` holds only the success example: merge the
    operation's error responses into it (`{**documented(...)["responses"], ...}` is done by
    `with_errors`)."""
    operation: dict[str, Any] = {"summary": summary, "description": description}
    if request is not None or request_schema is not None:
        content: dict[str, Any] = {"example": request}
        if request_schema is not None:
            content["schema"] = request_schema
        operation["openapi_extra"] = {"requestBody": {"required": True, "content": {JSON: content}}}
    if response is not None:
        operation["responses"] = {
            status: {"content": {media: {"example": response} for media in media_types}}
        }
    return operation


def with_errors(
    documentation: dict[str, Any], errors: dict[int | str, dict[str, Any]]
) -> dict[str, Any]:
    """`documented(...)` with the operation's error responses added."""
    return {**documentation, "responses": {**documentation.get("responses", {}), **errors}}
