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
