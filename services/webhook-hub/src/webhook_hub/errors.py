"""webhook-hub's error envelope: `{"error": <text>, "code": <code>, ...}`.

The spec fixes `error` as a string (its 422 adds `invalid_events`); `code` is our addition so
clients can branch without parsing text.
"""

from typing import Any

from fastapi import Request
from pydantic import BaseModel, ConfigDict
from servicekit.web.errors import ServiceError


class ErrorBody(BaseModel):
    model_config = ConfigDict(extra="allow")

    error: str
    code: str


def render_error(error: ServiceError, request: Request) -> dict[str, Any]:
    return {"error": error.message, "code": error.code, **error.extra}


def _declared(status: int, description: str) -> dict[str, Any]:
    return {"model": ErrorBody, "description": description}


AUTH_ERRORS: dict[int | str, dict[str, Any]] = {
    401: _declared(401, "Missing or invalid API key"),
    403: _declared(403, "The key's level is too low"),
}
NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: _declared(404, "No such resource (or not yours)")
}
BAD_CURSOR: dict[int | str, dict[str, Any]] = {
    400: _declared(400, "A cursor this API did not issue")
}
CONFLICT: dict[int | str, dict[str, Any]] = {409: _declared(409, "The name or the limit is taken")}
INVALID: dict[int | str, dict[str, Any]] = {
    413: _declared(413, "Request body too large"),
    422: _declared(422, "Invalid body, unknown event types, or refused endpoint"),
}
