"""One-time sign-in links, for every service's pages: a random token handed out once and kept
only as its SHA-256, that opens one page session for an owner at a level, at most once, before
it expires. Each service keeps its own table (any SQLModel table with `token_hash`, `owner`,
`level`, `expires_at` and `used_at` columns) and binds it here; the rules live only here.

Opening a link takes two steps in the services: `check` for the GET page (link previews and
mail scanners fetch the address and must not spend it), `redeem` for the POST that signs in.

A link issued over the API keeps the id of the key that asked for it (`api_key_id`): once that
key is revoked or given another level, the link no longer signs in, and the session it opened
ends (the session stands on the same key). An operator's CLI link has no key."""

from __future__ import annotations

import hashlib
import secrets
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any, Generic, Protocol, TypeVar, cast

from fastapi import Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sqlalchemy import Table, update
from sqlmodel import SQLModel
from sqlmodel.ext.asyncio.session import AsyncSession

from servicekit.auth.api_keys import AccessLevel
from servicekit.auth.page_sessions import (
    LevelOf,
    SessionState,
    key_standing,
    key_state,
    same_level,
)
from servicekit.errors import NotFound, ServiceError
from servicekit.web.pages.site import Pages

TOKEN_BYTES = 32
# The lifetimes a link may be asked for (the services' link APIs and CLIs), alike everywhere.
MIN_LINK_TTL_SECONDS = 60
MAX_LINK_TTL_SECONDS = 24 * 3600
# A token is 43 url-safe characters; anything much longer is not one and is not hashed.
MAX_TOKEN_LENGTH = 100
COLUMNS = ("token_hash", "owner", "level", "expires_at", "used_at", "api_key_id")


class LinkRow(Protocol):
    token_hash: str
    owner: str
    level: str
    expires_at: datetime
    used_at: datetime | None
    api_key_id: uuid.UUID | None


Row = TypeVar("Row", bound=SQLModel)


class LinkState(StrEnum):
    OPEN = "open"
    USED = "used"
    EXPIRED = "expired"


def link_state(link: LinkRow, now: datetime) -> LinkState:
    """Used wins over expired: a link that signed someone in says so even after its expiry."""
    if link.used_at is not None:
        return LinkState.USED
    if link.expires_at <= now:
        return LinkState.EXPIRED
    return LinkState.OPEN


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def link_url(base_url: str, path: str, token: str) -> str:
    """`path` is the link route's prefix, ending in a slash (e.g. `/portal/link/`)."""
    return f"{base_url.rstrip('/')}{path}{token}"


# --- errors: pages under the service's prefix render them as the kit's error page ------------


class LinkGone(ServiceError):
    """A link already used: 410, never a second session."""

    status_code = 410
    code = "link_used"
    default_message = "This link was already used. Each link signs in once: ask for a new one."


class LinkExpired(LinkGone):
    code = "link_expired"
    default_message = "This link has expired. Ask for a new one."


class LinkKeyRevoked(LinkGone):
    code = "link_key_revoked"
    default_message = (
        "This link no longer signs in: the key that issued it was revoked or changed. "
        "Ask for a new one."
    )


class LinkUnknown(NotFound):
    code = "link_unknown"
    default_message = "This link is not valid. Check it was copied whole, or ask for a new one."


@dataclass(frozen=True)
class IssuedLink:
    """The plaintext token exists only here, in the answer to whoever asked for the link."""

    token: str
    url: str
    expires_at: datetime


@dataclass(frozen=True)
class OpenLink:
    owner: str
    level: AccessLevel
    api_key_id: uuid.UUID | None = None


class SignInLinkRepository(Generic[Row]):
    """The queries, over the service's own table."""

    def __init__(self, session: AsyncSession, table: type[Row]) -> None:
        self.session = session
        self.table = table
        columns: Table = table.__table__  # type: ignore[attr-defined]
        missing = [name for name in COLUMNS if name not in columns.c]
        if missing:
            raise TypeError(f"{table.__name__} has no column {', '.join(missing)}")
        self.columns = columns.c

    async def add(self, **values: Any) -> None:
        self.session.add(self.table(**values))
        await self.session.flush()

    async def get(self, token_hash: str) -> LinkRow | None:
        # The columns were checked in __init__: the row has LinkRow's attributes.
        return cast("LinkRow | None", await self.session.get(self.table, token_hash))

    async def claim(
        self, token_hash: str, now: datetime
    ) -> tuple[str, str, uuid.UUID | None] | None:
        """Mark the link used if it is unused and unexpired, in one statement (two tabs opening
        it at once: one wins); its owner, level and issuing key, or None."""
        c = self.columns
        statement = (
            update(self.table)
            .where(c.token_hash == token_hash, c.used_at.is_(None), c.expires_at > now)
            .values(used_at=now)
            .returning(c.owner, c.level, c.api_key_id)
        )
        connection = await self.session.connection()
        row = (await connection.execute(statement)).first()
        return None if row is None else (str(row[0]), str(row[1]), row[2])


class SignInLinks(Generic[Row]):
    """Issue, check and redeem one-time links of one service's table. `path` is the route the
    link opens (`/portal/link/`); `noun` names the link in the error pages ("portal link");
    `level_of` maps the issuing key's level to the link's, as the service's pages do."""

    def __init__(
        self,
        session: AsyncSession,
        table: type[Row],
        *,
        path: str,
        noun: str = "link",
        level_of: LevelOf = same_level,
    ) -> None:
        self.session = session
        self.links = SignInLinkRepository(session, table)
        self.path = path
        self.noun = noun
        self.level_of = level_of

    async def issue(
        self,
        owner: str,
        level: AccessLevel,
        *,
        base_url: str,
        ttl: timedelta,
        api_key_id: uuid.UUID | None,
        now: datetime | None = None,
    ) -> IssuedLink:
        """`api_key_id`: the key asking for the link (None only for an operator's CLI)."""
        token = secrets.token_urlsafe(TOKEN_BYTES)
        expires_at = (now or datetime.now(UTC)) + ttl
        await self.links.add(
            token_hash=hash_token(token),
            owner=owner,
            level=level.value,
            expires_at=expires_at,
            api_key_id=api_key_id,
        )
        return IssuedLink(token, link_url(base_url, self.path, token), expires_at)

    async def check(self, token: str, now: datetime | None = None) -> OpenLink:
        """The open link, or why not: LinkUnknown, LinkGone (used), LinkExpired or
        LinkKeyRevoked (its key revoked or at another level since)."""
        link = await self.links.get(hash_token(token)) if len(token) <= MAX_TOKEN_LENGTH else None
        if link is None:
            raise LinkUnknown(self._say(LinkUnknown.default_message))
        state = link_state(link, now or datetime.now(UTC))
        if state is LinkState.USED:
            raise LinkGone(self._say(LinkGone.default_message))
        if state is LinkState.EXPIRED:
            raise LinkExpired(self._say(LinkExpired.default_message))
        return await self._standing(OpenLink(link.owner, AccessLevel(link.level), link.api_key_id))

    async def redeem(self, token: str, now: datetime | None = None) -> OpenLink:
        """Spend the link: its owner and level, once; afterwards the errors of `check`."""
        moment = now or datetime.now(UTC)
        claimed = None
        if len(token) <= MAX_TOKEN_LENGTH:
            claimed = await self.links.claim(hash_token(token), moment)
        if claimed is None:
            await self.check(token, moment)
            # Claimed by a concurrent request between the two statements.
            raise LinkGone(self._say(LinkGone.default_message))
        owner, level, api_key_id = claimed
        # Refused after the claim, in its transaction: the error rolls the claim back.
        return await self._standing(OpenLink(owner, AccessLevel(level), api_key_id))

    async def _standing(self, link: OpenLink) -> OpenLink:
        """The link, if the key that issued it still stands at the link's level."""
        if link.api_key_id is None:
            return link
        key = await key_standing(self.session, link.api_key_id)
        state = key_state(link.level, link.api_key_id, key, level_of=self.level_of)
        if state is not SessionState.VALID:
            raise LinkKeyRevoked(self._say(LinkKeyRevoked.default_message))
        return link

    def _say(self, message: str) -> str:
        return message.replace("This link", f"This {self.noun}", 1)


# --- the two pages of a link, the same in every service --------------------------------------


def landing_page(
    pages: Pages, request: Request, link: OpenLink, *, destination: str
) -> HTMLResponse:
    """The GET of a link: who it signs in and a button that POSTs (a preview spends nothing).
    `destination` names where it leads, e.g. "the dashboard"."""
    context = {
        "title": f"Open {destination}",
        "owner": link.owner,
        "level": link.level.value,
        "destination": destination,
    }
    return pages.render(request, "kit/link.html", context)


async def signed_in(pages: Pages, db: AsyncSession, link: OpenLink, target: str) -> Response:
    """The POST's answer once `redeem` succeeded: a page session standing on the link's key,
    and on to `target`."""
    response = RedirectResponse(target, status_code=303)
    await pages.start_session(db, response, link.owner, link.level, api_key_id=link.api_key_id)
    return response
