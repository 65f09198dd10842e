"""Content API credentials: `X-API-Key` (constant-time compare with the configured key) or
`Authorization: Bearer <HS256 JWT>` (`sub` is the user id). Never a key in the query string."""

from __future__ import annotations

import hmac

from fastapi import Request
from servicekit.auth.jwt import InvalidToken
from servicekit.web_session import SessionDep

from commerce_content.errors import InvalidRequest, NotAuthenticated
from commerce_content.identity.dependencies import Caller, known_caller_from_jwt
from commerce_content.identity.roles import Role
from commerce_content.settings import Settings

QUERY_KEY_NAMES = frozenset({"api_key", "apikey", "key", "x-api-key", "token", "access_token"})


async def content_caller(request: Request, session: SessionDep) -> Caller:
    if QUERY_KEY_NAMES & {name.lower() for name in request.query_params}:
        raise InvalidRequest("Credentials are not accepted in the query string; use X-API-Key")
    settings: Settings = request.app.state.settings
    key = request.headers.get("x-api-key")
    if key is not None:
        expected = settings.content_api_key.get_secret_value()
        if hmac.compare_digest(key.encode(), expected.encode()):
            return Caller("content-api-key", Role.GUEST, None, "api_key")
        raise NotAuthenticated("Unauthorized")
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token:
        raise NotAuthenticated("Unauthorized")
    try:
        return await known_caller_from_jwt(token, settings, session)
    except InvalidToken as exc:
        raise NotAuthenticated("Invalid token") from exc
