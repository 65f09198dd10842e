"""The client-credentials grant's rules (RFC 6749 section 4.4): who the client is, which scope
it gets, and the token it is issued. Refusals carry the RFC's error codes."""

from __future__ import annotations

from dataclasses import dataclass

from servicekit.auth.api_keys import AccessLevel
from sqlmodel.ext.asyncio.session import AsyncSession

from scraper_manager.oauth.repository import OAuthClientRepository
from scraper_manager.oauth.tokens import codec, secret_matches
from scraper_manager.settings import Settings


class OAuthRefusal(Exception):
    """A refusal in the RFC's terms (`error`, `error_description`), not the API's envelope."""

    def __init__(self, status: int, error: str, description: str) -> None:
        super().__init__(description)
        self.status = status
        self.error = error
        self.description = description


@dataclass(frozen=True)
class TokenGrant:
    access_token: str
    expires_in: int
    scope: AccessLevel


def granted_scope(allowed: AccessLevel, asked: str | None) -> AccessLevel:
    """The client's own level when it asks for none; the highest scope it asks for when its
    level allows that; refused otherwise."""
    if not asked:
        return allowed
    try:
        wanted = max((AccessLevel(s) for s in asked.split()), key=lambda level: level.rank)
    except ValueError:
        raise OAuthRefusal(400, "invalid_scope", "scopes are read, write and admin") from None
    if not allowed.allows(wanted):
        raise OAuthRefusal(400, "invalid_scope", f"this client may have at most {allowed}")
    return wanted


class OAuthTokenService:
    def __init__(self, session: AsyncSession, settings: Settings) -> None:
        self.clients = OAuthClientRepository(session)
        self.settings = settings

    async def grant(
        self, grant_type: str | None, credentials: tuple[str, str] | None, scope: str | None
    ) -> TokenGrant:
        if grant_type != "client_credentials":
            raise OAuthRefusal(
                400, "unsupported_grant_type", "only client_credentials is supported"
            )
        if credentials is None:
            raise OAuthRefusal(401, "invalid_client", "client authentication is required")
        client_id, secret = credentials
        client = await self.clients.active(client_id)
        if client is None or not secret_matches(secret, client.secret_hash):
            raise OAuthRefusal(401, "invalid_client", "unknown client or wrong secret")
        level = granted_scope(AccessLevel(client.level), scope)
        token = codec(self.settings).issue(
            client.client_id, {"scope": level.value, "owner": client.owner}
        )
        return TokenGrant(token, self.settings.oauth_token_ttl_seconds, level)
