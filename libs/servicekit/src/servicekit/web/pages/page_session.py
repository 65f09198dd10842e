"""The page session: who is signed in (an owner and a level, as an API key carries), kept in
a signed cookie, and when it ends. Framework-free decisions, unit-tested."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from itsdangerous import BadSignature, URLSafeSerializer
from pydantic import SecretStr

from servicekit.auth.api_keys import AccessLevel
from servicekit.settings import DEV_SECRET_PREFIX, ServiceSettings

# Re-issue the cookie (moving the idle deadline) at most this often, not on every request.
REFRESH_AFTER_SECONDS = 60


class PageSettings(ServiceSettings):
    """Settings of a service that serves pages: `<PREFIX>SESSION_SECRET` signs the session and
    CSRF cookies (production refuses the default, as every secret); a session ends after
    `session_idle_minutes` without a request, and `session_max_hours` after sign-in anyway."""

    session_secret: SecretStr = SecretStr(f"{DEV_SECRET_PREFIX}page-session-secret")
    session_idle_minutes: float = 30.0
    session_max_hours: float = 12.0


class SessionState(StrEnum):
    VALID = "valid"
    IDLE = "idle"  # no request for longer than the idle limit
    EXPIRED = "expired"  # older than the absolute limit


@dataclass(frozen=True)
class PageSession:
    owner: str
    level: AccessLevel
    session_id: str
    issued_at: float
    last_seen: float

    @classmethod
    def start(cls, owner: str, level: AccessLevel, now: float) -> PageSession:
        return cls(owner, level, secrets.token_urlsafe(16), now, now)

    def can(self, level: AccessLevel) -> bool:
        """Whether the session's level reaches `level` (read < write < admin)."""
        return self.level.allows(level)

    def seen(self, now: float) -> PageSession:
        return replace(self, last_seen=now)

    def needs_refresh(self, now: float) -> bool:
        return now - self.last_seen >= REFRESH_AFTER_SECONDS


def session_state(
    session: PageSession, now: float, *, idle_seconds: float, max_seconds: float
) -> SessionState:
    if now - session.issued_at >= max_seconds:
        return SessionState.EXPIRED
    if now - session.last_seen >= idle_seconds:
        return SessionState.IDLE
    return SessionState.VALID


class SessionCodec:
    """The cookie's value: the session as signed JSON (readable by its holder, which is fine:
    it holds nothing secret; unforgeable without the secret)."""

    def __init__(self, secret: SecretStr) -> None:
        self._serializer = URLSafeSerializer(
            secret.get_secret_value(), salt="servicekit.page-session"
        )

    def encode(self, session: PageSession) -> str:
        payload: dict[str, Any] = {
            "o": session.owner,
            "l": session.level.value,
            "sid": session.session_id,
            "iat": session.issued_at,
            "seen": session.last_seen,
        }
        return self._serializer.dumps(payload)

    def decode(self, value: str) -> PageSession | None:
        """None for anything this service did not sign (or signed in another shape)."""
        try:
            payload = self._serializer.loads(value)
            return PageSession(
                owner=str(payload["o"]),
                level=AccessLevel(payload["l"]),
                session_id=str(payload["sid"]),
                issued_at=float(payload["iat"]),
                last_seen=float(payload["seen"]),
            )
        except (BadSignature, KeyError, TypeError, ValueError):
            return None
