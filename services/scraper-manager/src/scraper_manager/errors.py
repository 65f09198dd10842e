"""scraper-manager's error envelope: `{"error": <text>, "code": <code>}`.

The spec leaves the body of errors open; we use the same flat shape as webhook-hub so a
client of both parses one form.
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


def _declared(description: str) -> dict[str, Any]:
    return {"model": ErrorBody, "description": description}


AUTH_ERRORS: dict[int | str, dict[str, Any]] = {
    401: _declared("Missing or invalid credentials"),
    403: _declared("The credential's level is too low"),
}
NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: _declared("No such scraper or run (or not yours)")
}
CONFLICT: dict[int | str, dict[str, Any]] = {
    409: _declared("Already running, not running, or at capacity")
}
INVALID: dict[int | str, dict[str, Any]] = {422: _declared("Invalid configuration")}
BAD_CURSOR: dict[int | str, dict[str, Any]] = {400: _declared("A cursor this API did not issue")}
