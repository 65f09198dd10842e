"""`POST /api/v1/oauth/token`: the client-credentials grant of RFC 6749 (section 4.4).

Errors follow the RFC (`{"error", "error_description"}`), which OAuth2 clients understand.
"""

from __future__ import annotations

import base64
from urllib.parse import parse_qs, unquote

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict

from scraper_manager.oauth.dependencies import OAuthTokenServiceDep
from scraper_manager.oauth.service import OAuthRefusal

router = APIRouter(prefix="/oauth", tags=["oauth"])
NO_STORE = {"Cache-Control": "no-store", "Pragma": "no-cache"}


def _oauth_error(status: int, error: str, description: str) -> JSONResponse:
    headers = dict(NO_STORE)
    if status == 401:
        headers["WWW-Authenticate"] = 'Basic realm="scraper-manager"'
    return JSONResponse(
        {"error": error, "error_description": description}, status_code=status, headers=headers
    )


def _basic(header: str) -> tuple[str, str] | None:
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "basic" or not value:
        return None
    try:
        decoded = base64.b64decode(value).decode()
    except ValueError:
        return None
    client_id, sep, secret = decoded.partition(":")
    return (unquote(client_id), unquote(secret)) if sep else None


class TokenResponse(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "access_token": "eyJhbGciOiJIUzI1NiJ9.eyJzY29wZSI6InJlYWQifQ.c2lnbmF0dXJl",
                    "token_type": "Bearer",
                    "expires_in": 900,
                    "scope": "read",
                }
            ]
        }
    )

    access_token: str
    token_type: str
    expires_in: int
    scope: str


class OAuthError(BaseModel):
    """RFC 6749's error body (not the API's flat envelope: OAuth clients parse this one)."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {"error": "invalid_client", "error_description": "unknown client or wrong secret"}
            ]
        }
    )

    error: str
    error_description: str


@router.post(
    "/token",
    response_model=TokenResponse,
    summary="Get an access token (client credentials)",
    description=(
        "OAuth2 client-credentials grant (RFC 6749 section 4.4) for corporate clients. Form "
        "body `grant_type=client_credentials` and optionally `scope=read|write|admin` (up to "
        "the client's level); the client authenticates with HTTP Basic or with "
        "`client_id`/`client_secret` in the form. The token is accepted wherever API keys are."
    ),
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "application/x-www-form-urlencoded": {
                    "schema": {
                        "type": "object",
                        "required": ["grant_type"],
                        "properties": {
                            "grant_type": {"type": "string", "enum": ["client_credentials"]},
                            "scope": {"type": "string", "enum": ["read", "write", "admin"]},
                            "client_id": {"type": "string"},
                            "client_secret": {"type": "string"},
                        },
                    },
                    "example": "grant_type=client_credentials&scope=read",
                }
            },
        }
    },
    responses={
        400: {"model": OAuthError, "description": "unsupported_grant_type or invalid_scope"},
        401: {"model": OAuthError, "description": "invalid_client"},
    },
)
async def token(request: Request, service: OAuthTokenServiceDep) -> JSONResponse:
    """Form body `grant_type=client_credentials` (and `scope`, optional); the client
    authenticates with HTTP Basic or `client_id`/`client_secret` in the form."""
    form = {k: v[0] for k, v in parse_qs((await request.body()).decode(errors="replace")).items()}
    credentials = _basic(request.headers.get("authorization", "")) or (
        (form["client_id"], form.get("client_secret", "")) if "client_id" in form else None
    )
    try:
        grant = await service.grant(form.get("grant_type"), credentials, form.get("scope"))
    except OAuthRefusal as refusal:
        return _oauth_error(refusal.status, refusal.error, refusal.description)
    return JSONResponse(
        {
            "access_token": grant.access_token,
            "token_type": "Bearer",
            "expires_in": grant.expires_in,
            "scope": grant.scope.value,
        },
        headers=NO_STORE,
    )
