"""`POST /api/contact`: store the inquiry, mail the administrators, publish `inquiry.created`."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, EmailStr, TypeAdapter, ValidationError
from servicekit.db.models import MailMessage
from servicekit.errors import BadRequest
from servicekit.events import record_event
from servicekit.web.session import SessionDep

from commerce_content.errors import PLAIN_ERRORS
from commerce_content.events import INQUIRY_CREATED, InquiryCreated
from commerce_content.models import Inquiry
from commerce_content.rate_limit.limiter import enforce_rate_limit
from commerce_content.settings import Settings
from commerce_content.text_rules import MESSAGE_WHITESPACE, has_control_characters

router = APIRouter(tags=["contact"])
_EMAIL: TypeAdapter[EmailStr] = TypeAdapter(EmailStr)
LIMITS = {"name": 200, "email": 320, "message": 10_000}


class Success(BaseModel):
    success: bool


def _field(body: Any, name: str) -> str:
    value = body.get(name) if isinstance(body, dict) else None
    if not isinstance(value, str) or not value.strip():
        raise BadRequest(f"{name} is required")
    if len(value) > LIMITS[name]:
        raise BadRequest(f"{name} is longer than {LIMITS[name]} characters")
    allowed = MESSAGE_WHITESPACE if name == "message" else frozenset()
    if has_control_characters(value, allowed):
        kinds = "control characters" if allowed else "line breaks or other control characters"
        raise BadRequest(f"{name} must not contain {kinds}")
    return value.strip()


@router.post(
    "/contact",
    response_model=Success,
    responses=PLAIN_ERRORS,
    dependencies=[Depends(enforce_rate_limit)],
)
async def contact(request: Request, session: SessionDep) -> Success:
    try:
        body = await request.json()
    except ValueError as exc:
        raise BadRequest("The body must be JSON with name, email and message") from exc
    name, email, message = (_field(body, f) for f in ("name", "email", "message"))
    try:
        _EMAIL.validate_python(email)
    except ValidationError as exc:
        raise BadRequest("email is not a valid address") from exc
    inquiry = Inquiry(name=name, email=email, message=message)
    session.add(inquiry)
    await session.flush()
    assert inquiry.id is not None
    settings: Settings = request.app.state.settings
    for admin in settings.admin_emails:
        session.add(
            MailMessage(
                recipient=admin,
                subject=f"New inquiry from {name}",
                body=f"From: {name} <{email}>\nInquiry #{inquiry.id}\n\n{message}\n",
            )
        )
    await record_event(
        session,
        INQUIRY_CREATED,
        InquiryCreated(id=inquiry.id, name=name, email=email, message=message, status="new"),
    )
    return Success(success=True)
