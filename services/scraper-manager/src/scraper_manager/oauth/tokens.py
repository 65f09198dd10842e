"""Access tokens: issuing ours (client credentials) and verifying ours or an external issuer's.

The token's `scope` carries the access level (read, write or admin) and `owner` the client the
resources belong to; external tokens name the owner in `sub` unless they carry `owner`.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import secrets
import time
from typing import Any

import httpx
from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet
from servicekit.auth.api_keys import AccessLevel
from servicekit.auth.dependencies import Principal
from servicekit.auth.jwt import InvalidToken, JWTCodec

from scraper_manager.settings import Settings

JWKS_CACHE_SECONDS = 300.0


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def secret_matches(secret: str, stored: str) -> bool:
    return hmac.compare_digest(hash_secret(secret), stored)


def new_client_credentials() -> tuple[str, str]:
    return f"smc_{secrets.token_hex(8)}", secrets.token_urlsafe(32)


def codec(settings: Settings) -> JWTCodec:
    return JWTCodec(
        settings.oauth_token_secret.get_secret_value(),
        issuer=settings.oauth_issuer,
        audience=settings.oauth_audience,
        ttl_seconds=settings.oauth_token_ttl_seconds,
    )


def _principal(claims: dict[str, Any]) -> Principal | None:
    scope = str(claims.get("scope", "")).split()
    levels = [AccessLevel(s) for s in scope if s in {level.value for level in AccessLevel}]
    if not levels:
        return None
    level = max(levels, key=lambda lv: lv.rank)
    owner = str(claims.get("owner") or claims.get("sub") or "")
    return Principal(owner=owner, level=level) if owner else None


class TokenVerifier:
    """`app.state.bearer_verifier`: ours first, then the external issuer's."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._codec = codec(settings)
        self._jwks: KeySet | None = None
        self._jwks_at = 0.0

    async def __call__(self, token: str) -> Principal | None:
        with contextlib.suppress(InvalidToken):  # not ours: maybe the external issuer's
            return _principal(self._codec.verify(token))
        if self.settings.external_issuer and self.settings.external_jwks_url:
            return await self._external(token)
        return None

    async def _keys(self) -> KeySet:
        if self._jwks is None or time.monotonic() - self._jwks_at > JWKS_CACHE_SECONDS:
            assert self.settings.external_jwks_url is not None
            async with httpx.AsyncClient(timeout=5) as http:
                response = await http.get(self.settings.external_jwks_url)
                response.raise_for_status()
            self._jwks = KeySet.import_key_set(response.json())
            self._jwks_at = time.monotonic()
        return self._jwks

    async def _external(self, token: str) -> Principal | None:
        try:
            keys = await self._keys()
            decoded = jwt.decode(token, keys, algorithms=["RS256", "ES256", "PS256"])
            issuer = self.settings.external_issuer or ""
            audience = self.settings.external_audience or self.settings.oauth_audience
            registry = jwt.JWTClaimsRegistry(
                leeway=30,
                iss={"essential": True, "value": issuer},
                aud={"essential": True, "value": audience},
                exp={"essential": True},
            )
            registry.validate(decoded.claims)
        except (JoseError, ValueError, httpx.HTTPError):
            return None
        return _principal(dict(decoded.claims))
