"""commerce-content's error envelopes (the first two fixed by the spec, the third GraphQL's):

- the resource API under `/api/v1/`: `{"error": {"code": ..., "message": ...}}`;
- `/graphql`: GraphQL's `{"errors": [{"message": ..., "extensions": {"code": ...}}]}`;
- everything else (checkout, payment notifications, search, contact, admin action, content
  API): `{"error": <text>}`.
"""

from typing import Any

from fastapi import Request
from pydantic import BaseModel
from servicekit.errors import ServiceError

RESOURCE_API_PREFIX = "/api/v1/"


class ErrorDetail(BaseModel):
    code: str
    message: str


class ResourceErrorBody(BaseModel):
    error: ErrorDetail


class PlainErrorBody(BaseModel):
    error: str


GRAPHQL_PATH = "/graphql"
# Refusals of the request itself (the input guard, the body size limit) in GraphQL's words.
_GRAPHQL_CODES = {400: "BAD_USER_INPUT", 413: "BAD_USER_INPUT", 422: "BAD_USER_INPUT"}


def render_error(error: ServiceError, request: Request) -> dict[str, Any]:
    if request.url.path.startswith(RESOURCE_API_PREFIX):
        return {"error": {"code": error.code, "message": error.message, **error.extra}}
    if request.url.path == GRAPHQL_PATH:
        # GraphQL clients read `errors`, as the endpoint's own refusals give them.
        code = _GRAPHQL_CODES.get(error.status_code, error.code.upper())
        return {"errors": [{"message": error.message, "extensions": {"code": code}}]}
    return {"error": error.message}


def _resource(description: str) -> dict[str, Any]:
    return {"model": ResourceErrorBody, "description": description}


# Every status the resource API's spec lists besides its successes.
RESOURCE_ERRORS: dict[int | str, dict[str, Any]] = {
    400: _resource("Validation error: a bad parameter or body"),
    401: _resource("Missing or invalid token"),
    403: _resource("The caller's role may not do this"),
    404: _resource("No such article"),
    406: _resource("Unknown API version in Accept"),
    409: _resource("Conflict, e.g. a slug already used"),
    422: _resource("Semantic error, e.g. an author that does not exist"),
    429: _resource("Rate limit exceeded; see Retry-After"),
    500: _resource("Unexpected error (no internals)"),
}


def _plain(description: str) -> dict[str, Any]:
    return {"model": PlainErrorBody, "description": description}


PLAIN_NOT_FOUND: dict[int | str, dict[str, Any]] = {404: _plain("No such item")}
PLAIN_CONFLICT: dict[int | str, dict[str, Any]] = {409: _plain("The alias is already used")}
PLAIN_ERRORS: dict[int | str, dict[str, Any]] = {
    400: _plain("Missing or invalid input"),
    401: _plain("Unauthorized"),
    403: _plain("Forbidden"),
    429: _plain("Rate limit exceeded; see Retry-After"),
}
