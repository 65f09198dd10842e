"""`POST /api/admin-action`: an authenticated admin's action, written to the audit log."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel
from servicekit.auth.jwt import InvalidToken
from servicekit.web_session import SessionDep

from commerce_content.admin_action.dependencies import AuditServiceDep
from commerce_content.errors import InvalidRequest, NotAuthenticated, NotPermitted, plain_errors
from commerce_content.identity.dependencies import known_caller_from_jwt
from commerce_content.identity.roles import Role
from commerce_content.openapi import documented, with_errors
from commerce_content.settings import SettingsDep

router = APIRouter(tags=["admin"])


class Success(BaseModel):
    success: bool


@router.post(
    "/admin-action",
    response_model=Success,
    **with_errors(
        documented(
            "Run an audited admin action",
            "Any JSON body, by a user whose bearer JWT has the admin role (401 without one,"
            " 403 for other roles). The audit log keeps the action (the body's `action`, else"
            " `admin-action`), the user id, an ISO 8601 timestamp and the body.",
            request={"action": "reindex", "reason": "new catalogue"},
            request_schema={"type": "object"},
            response={"success": True},
        ),
        plain_errors(InvalidRequest, NotAuthenticated, NotPermitted),
    ),
)
async def admin_action(
    request: Request, settings: SettingsDep, session: SessionDep, service: AuditServiceDep
) -> Success:
    """Any JSON body. The caller is a user (bearer JWT) with the admin role; the audit row
    keeps the action name (the body's `action`, else "admin-action"), the user id, an ISO 8601
    timestamp and the body."""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token:
        raise NotAuthenticated("Unauthorized")
    try:
        caller = await known_caller_from_jwt(token, settings, session)
    except InvalidToken as exc:
        raise NotAuthenticated("Unauthorized") from exc
    if caller.role is not Role.ADMIN:
        raise NotPermitted("Forbidden")
    try:
        body: Any = await request.json()
    except ValueError as exc:
        raise InvalidRequest("The body must be JSON") from exc
    await service.record(caller.subject, body)
    return Success(success=True)
