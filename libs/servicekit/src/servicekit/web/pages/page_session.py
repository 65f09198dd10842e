"""The page session's settings; the session itself (a row on the server named by the cookie)
and its rules are `servicekit.auth.page_sessions`, framework-free for the worker's clean-up."""

from __future__ import annotations

from pydantic import Field, SecretStr

from servicekit.auth.page_sessions import (
    REFRESH_AFTER_SECONDS,
    PageSession,
    SessionCookie,
    SessionState,
    session_state,
)
from servicekit.auth.throttle import DEFAULT_LIMIT, DEFAULT_WINDOW_SECONDS
from servicekit.settings import DEV_SECRET_PREFIX, ServiceSettings


class PageSettings(ServiceSettings):
    """Settings of a service that serves pages: `<PREFIX>SESSION_SECRET` signs the session and
    CSRF cookies (production refuses the default, as every secret); a session ends after
    `session_idle_minutes` without a request, and `session_max_hours` after sign-in anyway.
    An address past `sign_in_failure_limit` failed key sign-ins within
    `sign_in_failure_window_seconds` is answered 429 until the oldest leaves the window. The
    worker deletes expired sessions every `session_cleanup_seconds`, and sign-in links
    `link_retention_hours` after their expiry (servicekit.retention)."""

    session_secret: SecretStr = SecretStr(f"{DEV_SECRET_PREFIX}page-session-secret")
    session_idle_minutes: float = 30.0
    session_max_hours: float = 12.0
    sign_in_failure_limit: int = Field(default=DEFAULT_LIMIT, ge=1)
    sign_in_failure_window_seconds: float = Field(default=DEFAULT_WINDOW_SECONDS, gt=0)
    session_cleanup_seconds: float = Field(default=300.0, gt=0)
    # One-time sign-in links are deleted this long after they expire (used or not).
    link_retention_hours: float = Field(default=168.0, gt=0)


__all__ = [
    "REFRESH_AFTER_SECONDS",
    "PageSession",
    "PageSettings",
    "SessionCookie",
    "SessionState",
    "session_state",
]
