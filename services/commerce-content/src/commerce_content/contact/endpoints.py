"""`POST /api/contact`: the form's checks, then ContactService."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, EmailStr, Field, TypeAdapter, ValidationError

from commerce_content.contact.dependencies import ContactServiceDep
from commerce_content.errors import InvalidRequest, TooManyRequests, plain_errors
from commerce_content.openapi import documented, with_errors
from commerce_content.rate_limit.limiter import enforce_rate_limit
from commerce_content.text_rules import MESSAGE_WHITESPACE, has_control_characters

router = APIRouter(tags=["contact"])
_EMAIL: TypeAdapter[EmailStr] = TypeAdapter(EmailStr)
LIMITS = {"name": 200, "email": 320, "message": 10_000}


class Success(BaseModel):
    success: bool


class Inquiry(BaseModel):
    """The body, documented; read by hand so each refusal is the spec's 400 text."""

    name: str = Field(max_length=LIMITS["name"])
    email: str = Field(max_length=LIMITS["email"])
    message: str = Field(max_length=LIMITS["message"])


def _field(body: Any, name: str) -> str:
    value = body.get(name) if isinstance(body, dict) else None
    if not isinstance(value, str) or not value.strip():
        raise InvalidRequest(f"{name} is required")
    if len(value) > LIMITS[name]:
        raise InvalidRequest(f"{name} is longer than {LIMITS[name]} characters")
    allowed = MESSAGE_WHITESPACE if name == "message" else frozenset()
    if has_control_characters(value, allowed):
        kinds = "control characters" if allowed else "line breaks or other control characters"
        raise InvalidRequest(f"{name} must not contain {kinds}")
    return value.strip()


@router.post(
    "/contact",
    response_model=Success,
    **with_errors(
        documented(
            "Send a contact inquiry",
            "`name`, `email` and `message`, all required. The inquiry is stored `new`, the"
            " administrators are mailed, and `inquiry.created` is published.",
            request={"name": "Grace", "email": "grace@example.com", "message": "Ship to Oslo?"},
            request_schema=Inquiry.model_json_schema(),
            response={"success": True},
        ),
        plain_errors(InvalidRequest, TooManyRequests),
    ),
    dependencies=[Depends(enforce_rate_limit)],
)
async def contact(request: Request, service: ContactServiceDep) -> Success:
    try:
        body = await request.json()
    except ValueError as exc:
        raise InvalidRequest("The body must be JSON with name, email and message") from exc
    name, email, message = (_field(body, f) for f in ("name", "email", "message"))
    try:
        _EMAIL.validate_python(email)
    except ValidationError as exc:
        raise InvalidRequest("email is not a valid address") from exc
    await service.submit(name, email, message)
    return Success(success=True)
