"""Page sessions kept on the server: the browser's cookie carries a random token, the service's
table keeps only its SHA-256 with who the session is (owner, level), the API key it stands on
(the key signed in with, or the key that issued its one-time link; none for an operator's CLI
link), the service that opened it, and when it was opened, last seen and expires.

Every page request loads the row and decides here whether the session still holds: within its
idle and absolute limits, and its key neither revoked nor at another level. Signing out deletes
the row; the worker deletes expired rows in batches. Each service binds its own table (any
SQLModel table with the columns of `COLUMNS`), as with sign-in links. Framework-free: the
worker's clean-up uses it without the web stack."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import secrets
import uuid
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import structlog
from itsdangerous import BadSignature, URLSafeSerializer
from pydantic import SecretStr
from sqlalchemy import Table, delete, select, update
from sqlmodel import SQLModel
from sqlmodel.ext.asyncio.session import AsyncSession

from servicekit.auth.api_keys import AccessLevel
from servicekit.db.models import ApiKey

if TYPE_CHECKING:
    from servicekit.runtime import ServiceRuntime

logger = structlog.get_logger(__name__)

TOKEN_BYTES = 32
# A token is 43 url-safe characters; anything much longer is not one and is not hashed.
MAX_TOKEN_LENGTH = 100
# Move `last_seen_at` (and the idle deadline) at most this often, not on every request.
REFRESH_AFTER_SECONDS = 60
COLUMNS = (
    "id_hash",
    "service",
    "owner",
    "level",
    "api_key_id",
    "created_at",
    "last_seen_at",
    "expires_at",
)
# Rows the clean-up deletes per statement: short transactions on a small table.
CLEANUP_BATCH = 1000

Row = TypeVar("Row", bound=SQLModel)
LevelOf = Callable[[AccessLevel], AccessLevel]


def same_level(level: AccessLevel) -> AccessLevel:
    return level


class SessionState(StrEnum):
    VALID = "valid"
    IDLE = "idle"  # no request for longer than the idle limit
    EXPIRED = "expired"  # older than the absolute limit
    KEY_REVOKED = "key_revoked"  # its key (or its link's issuer) is revoked or gone
    LEVEL_CHANGED = "level_changed"  # its key now has another level


@dataclass(frozen=True)
class PageSession:
    """A signed-in page session. `session_id` is the token's hash (the row's key): never the
    token itself, which only the browser holds. Times are seconds since the epoch."""

    owner: str
    level: AccessLevel
    session_id: str
    issued_at: float
    last_seen: float
    api_key_id: uuid.UUID | None = None

    def can(self, level: AccessLevel) -> bool:
        """Whether the session's level reaches `level` (read < write < admin)."""
        return self.level.allows(level)

    def seen(self, now: float) -> PageSession:
        return replace(self, last_seen=now)

    def needs_refresh(self, now: float) -> bool:
        return now - self.last_seen >= REFRESH_AFTER_SECONDS


@dataclass(frozen=True)
class KeyStanding:
    """The API key a session stands on, as it is now."""

    level: str
    revoked: bool


def session_state(
    session: PageSession, now: float, *, idle_seconds: float, max_seconds: float
) -> SessionState:
    if now - session.issued_at >= max_seconds:
        return SessionState.EXPIRED
    if now - session.last_seen >= idle_seconds:
        return SessionState.IDLE
    return SessionState.VALID


def key_state(
    level: AccessLevel,
    api_key_id: uuid.UUID | None,
    key: KeyStanding | None,
    *,
    level_of: LevelOf = same_level,
) -> SessionState:
    """Whether a session (or a link) at `level` still stands on its key: a key gone or revoked
    ends it, and so does a change of the key's level (either way: a session never keeps a level
    its key no longer gives). `level_of` maps a key's level to a session's (the portal gives
    an operator key an admin session). No key (an operator's CLI link): nothing to follow."""
    if api_key_id is None:
        return SessionState.VALID
    if key is None or key.revoked:
        return SessionState.KEY_REVOKED
    try:
        key_level = AccessLevel(key.level)
    except ValueError:
        return SessionState.LEVEL_CHANGED
    if level_of(key_level) is not level:
        return SessionState.LEVEL_CHANGED
    return SessionState.VALID


def session_verdict(
    session: PageSession,
    key: KeyStanding | None,
    now: float,
    *,
    idle_seconds: float,
    max_seconds: float,
    level_of: LevelOf = same_level,
) -> SessionState:
    state = session_state(session, now, idle_seconds=idle_seconds, max_seconds=max_seconds)
    if state is not SessionState.VALID:
        return state
    return key_state(session.level, session.api_key_id, key, level_of=level_of)


def expires_at(
    issued_at: float, last_seen: float, *, idle_seconds: float, max_seconds: float
) -> float:
    """When a session dies if nothing else happens: its idle or its absolute deadline."""
    return min(issued_at + max_seconds, last_seen + idle_seconds)


def new_token() -> str:
    return secrets.token_urlsafe(TOKEN_BYTES)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def moment(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


class SessionCookie:
    """The cookie's value: the random token, signed with the service's name in the signing
    context, so a cookie of another service (even one sharing `SESSION_SECRET`) is refused
    before any query, besides its row being another service's."""

    def __init__(self, secret: SecretStr, service: str) -> None:
        self._serializer = URLSafeSerializer(
            secret.get_secret_value(), salt=f"servicekit.page-session|{service}"
        )

    def encode(self, token: str) -> str:
        return self._serializer.dumps(token)

    def decode(self, value: str) -> str | None:
        """The token, or None for anything this service did not sign (or signed in another
        shape); never raises."""
        if len(value) > 4 * MAX_TOKEN_LENGTH:
            return None
        try:
            token = self._serializer.loads(value)
        except (BadSignature, TypeError, ValueError, UnicodeError):
            return None
        if not isinstance(token, str) or not token or len(token) > MAX_TOKEN_LENGTH:
            return None
        return token


def key_standing_of(level: str | None, revoked_at: datetime | None) -> KeyStanding | None:
    """A joined key's columns (all None: no such key) as its standing."""
    return None if level is None else KeyStanding(level, revoked_at is not None)


class PageSessionRepository(Generic[Row]):
    """The queries, over the service's own table."""

    def __init__(self, session: AsyncSession, table: type[Row]) -> None:
        self.session = session
        self.table = table
        self.columns = self.check_table(table).c

    @staticmethod
    def check_table(table: type[SQLModel]) -> Table:
        """The table, if it has the columns of a page session table; TypeError otherwise."""
        columns: Table = table.__table__  # type: ignore[attr-defined]
        missing = [name for name in COLUMNS if name not in columns.c]
        if missing:
            raise TypeError(f"{table.__name__} has no column {', '.join(missing)}")
        return columns

    async def add(self, **values: Any) -> None:
        self.session.add(self.table(**values))
        await self.session.flush()

    async def load(
        self, id_hash: str, service: str
    ) -> tuple[PageSession, KeyStanding | None] | None:
        """The session of this hash opened by `service`, and its key as it is now, in one
        statement; None when there is no such row (signed out, cleaned up, another service's)."""
        c = self.columns
        keys: Table = ApiKey.__table__  # type: ignore[attr-defined]
        statement = (
            select(
                c.owner,
                c.level,
                c.api_key_id,
                c.created_at,
                c.last_seen_at,
                keys.c.level,
                keys.c.revoked_at,
            )
            .select_from(self.check_table(self.table).outerjoin(keys, keys.c.id == c.api_key_id))
            .where(c.id_hash == id_hash, c.service == service)
        )
        connection = await self.session.connection()
        row = (await connection.execute(statement)).first()
        if row is None:
            return None
        owner, level, api_key_id, created_at, last_seen_at, key_level, revoked_at = row
        try:
            session_level = AccessLevel(level)
        except ValueError:
            return None
        session = PageSession(
            owner=str(owner),
            level=session_level,
            session_id=id_hash,
            issued_at=created_at.timestamp(),
            last_seen=last_seen_at.timestamp(),
            api_key_id=api_key_id,
        )
        return session, key_standing_of(key_level, revoked_at)

    async def touch(self, id_hash: str, last_seen: datetime, expires: datetime) -> None:
        c = self.columns
        statement = (
            update(self.table)
            .where(c.id_hash == id_hash)
            .values(last_seen_at=last_seen, expires_at=expires)
        )
        await (await self.session.connection()).execute(statement)

    async def remove(self, id_hash: str) -> None:
        statement = delete(self.table).where(self.columns.id_hash == id_hash)
        await (await self.session.connection()).execute(statement)

    async def remove_expired(self, now: datetime, limit: int = CLEANUP_BATCH) -> int:
        """Up to `limit` expired rows, by the `expires_at` index; how many were deleted."""
        c = self.columns
        batch = select(c.id_hash).where(c.expires_at <= now).limit(limit).scalar_subquery()
        statement = delete(self.table).where(c.id_hash.in_(batch))
        result = await (await self.session.connection()).execute(statement)
        return int(result.rowcount or 0)


async def key_standing(session: AsyncSession, api_key_id: uuid.UUID) -> KeyStanding | None:
    """An API key's standing now (a link's issuer, say); None if there is no such key."""
    statement = select(ApiKey.level, ApiKey.revoked_at).where(  # type: ignore[call-overload]
        ApiKey.id == api_key_id
    )
    row = (await (await session.connection()).execute(statement)).first()
    return None if row is None else key_standing_of(row[0], row[1])


async def delete_expired_sessions(
    factory: Callable[[], AsyncSession], table: type[SQLModel], now: datetime
) -> int:
    """Every expired session of `table`, a batch per transaction; how many were deleted."""
    total = 0
    while True:
        async with factory() as session, session.begin():
            deleted = await PageSessionRepository(session, table).remove_expired(now)
        total += deleted
        if deleted < CLEANUP_BATCH:
            return total


# The clean-up loop as the worker's `/readyz` names it when it makes no progress.
SESSION_CLEANUP_LOOP = "page-session-cleanup"


def session_cleanup_loop(
    table: type[SQLModel], every_seconds: float
) -> Callable[[ServiceRuntime, asyncio.Event], Coroutine[Any, Any, None]]:
    """The worker's loop deleting expired page sessions of `table` every `every_seconds`."""

    async def run(runtime: ServiceRuntime, stop: asyncio.Event) -> None:
        runtime.progress.beat(SESSION_CLEANUP_LOOP, every_seconds)
        while not stop.is_set():
            try:
                deleted = await delete_expired_sessions(
                    runtime.session_factory, table, datetime.now(UTC)
                )
                if deleted:
                    logger.info("expired page sessions deleted", sessions=deleted)
                runtime.progress.beat(SESSION_CLEANUP_LOOP, every_seconds)
            except Exception as exc:
                logger.warning("page session clean-up failed", error=repr(exc))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), every_seconds)

    return run


def session_times(
    now: float, *, idle_seconds: float, max_seconds: float
) -> tuple[datetime, datetime]:
    """A new session's `created_at`/`last_seen_at` and its `expires_at`."""
    return moment(now), moment(
        expires_at(now, now, idle_seconds=idle_seconds, max_seconds=max_seconds)
    )


__all__ = [
    "COLUMNS",
    "KeyStanding",
    "LevelOf",
    "PageSession",
    "PageSessionRepository",
    "SessionCookie",
    "SessionState",
    "delete_expired_sessions",
    "expires_at",
    "hash_token",
    "key_standing",
    "key_state",
    "moment",
    "new_token",
    "session_cleanup_loop",
    "session_state",
    "session_times",
    "session_verdict",
]
