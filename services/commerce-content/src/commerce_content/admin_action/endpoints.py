"""`POST /api/admin-action`: an authenticated admin's action, written to the audit log."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel
from servicekit.auth.jwt import InvalidToken
from servicekit.errors import BadRequest, Forbidden, Unauthorized
from servicekit.web.session import SessionDep

from commerce_content.errors import PLAIN_ERRORS
from commerce_content.identity.dependencies import caller_from_jwt
from commerce_content.identity.roles import Role
from commerce_content.models import AuditLog
from commerce_content.settings import Settings

router = APIRouter(tags=["admin"])
DEFAULT_ACTION = "admin-action"


class Success(BaseModel):
    success: bool


@router.post("/admin-action", response_model=Success, responses=PLAIN_ERRORS)
async def admin_action(request: Request, session: SessionDep) -> Success:
    """Any JSON body. The caller is a user (bearer JWT) with the admin role; the audit row
    keeps the action name (the body's `action`, else "admin-action"), the user id, an ISO 8601
    timestamp and the body."""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token:
        raise Unauthorized("Unauthorized")
    settings: Settings = request.app.state.settings
    try:
        caller = caller_from_jwt(token, settings)
    except InvalidToken as exc:
        raise Unauthorized("Unauthorized") from exc
    if caller.role is not Role.ADMIN:
        raise Forbidden("Forbidden")
    try:
        body: Any = await request.json()
    except ValueError as exc:
        raise BadRequest("The body must be JSON") from exc
    action = body.get("action") if isinstance(body, dict) else None
    session.add(
        AuditLog(
            action=action if isinstance(action, str) and action else DEFAULT_ACTION,
            user_id=caller.subject,
            timestamp=datetime.now(UTC).isoformat(),
            data=body if isinstance(body, dict) else {"body": body},
        )
    )
    await session.flush()
    return Success(success=True)
