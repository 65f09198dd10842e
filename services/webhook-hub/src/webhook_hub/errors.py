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
