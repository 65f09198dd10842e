"""commerce-content's two error envelopes, both fixed by the spec:

- the resource API under `/api/v1/`: `{"error": {"code": ..., "message": ...}}`;
- everything else (checkout, payment notifications, search, contact, admin action, content
  API): `{"error": <text>}`.
"""

from typing import Any

from fastapi import Request
from pydantic import BaseModel
from servicekit.web.errors import ServiceError

RESOURCE_API_PREFIX = "/api/v1/"


class ErrorDetail(BaseModel):
    code: str
    message: str


class ResourceErrorBody(BaseModel):
    error: ErrorDetail


class PlainErrorBody(BaseModel):
    error: str


def render_error(error: ServiceError, request: Request) -> dict[str, Any]:
    if request.url.path.startswith(RESOURCE_API_PREFIX):
        return {"error": {"code": error.code, "message": error.message, **error.extra}}
    return {"error": error.message}
