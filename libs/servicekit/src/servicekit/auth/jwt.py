"""HS256 JSON Web Tokens (joserfc, Authlib's JOSE implementation): `sub` and `exp` always
required; `iss` and `aud` issued and required only when the operator configures them, so a
token from any HS256 library with the shared secret works (the interop contract)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from typing import Any

from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import OctKey

ALGORITHM = "HS256"


class InvalidToken(ValueError):
    """The token is malformed, expired, for another audience or issuer, or wrongly signed."""


class JWTCodec:
    def __init__(
        self,
        secret: str,
        *,
        issuer: str | None = None,
        audience: str | None = None,
        ttl_seconds: int = 3600,
    ) -> None:
        if not secret:
            raise ValueError("a JWT secret is required")
        self._key = OctKey.import_key(secret.encode())
        self.issuer = issuer
        self.audience = audience
        self.ttl_seconds = ttl_seconds

    def issue(
        self,
        subject: str,
        claims: Mapping[str, Any] | None = None,
        *,
        ttl_seconds: int | None = None,
        now: int | None = None,
    ) -> str:
        issued = int(time.time()) if now is None else now
        payload: dict[str, Any] = {
            "sub": subject,
            "iat": issued,
            "nbf": issued,
            "exp": issued + (self.ttl_seconds if ttl_seconds is None else ttl_seconds),
            "jti": uuid.uuid4().hex,
        }
        if self.issuer is not None:
            payload["iss"] = self.issuer
        if self.audience is not None:
            payload["aud"] = self.audience
        payload.update(claims or {})
        return jwt.encode(
            {"alg": ALGORITHM, "typ": "JWT"}, payload, self._key, algorithms=[ALGORITHM]
        )

    def verify(self, token: str, *, now: int | None = None) -> dict[str, Any]:
        """The claims of a valid token; raises InvalidToken otherwise."""
        try:
            decoded = jwt.decode(token, self._key, algorithms=[ALGORITHM])
            expected: dict[str, Any] = {"exp": {"essential": True}, "sub": {"essential": True}}
            if self.issuer is not None:
                expected["iss"] = {"essential": True, "value": self.issuer}
            if self.audience is not None:
                expected["aud"] = {"essential": True, "value": self.audience}
            registry = jwt.JWTClaimsRegistry(now=now, leeway=30, **expected)
            registry.validate(decoded.claims)
        except (JoseError, ValueError, TypeError) as exc:
            raise InvalidToken(str(exc) or type(exc).__name__) from exc
        return dict(decoded.claims)
