"""The rules of portal access: a link is a random token kept only as its SHA-256, opens one
session for its owner at its level, once, before it expires."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum

from servicekit.auth.api_keys import AccessLevel
from sqlmodel.ext.asyncio.session import AsyncSession

from webhook_hub.errors import PortalLinkExpired, PortalLinkGone, PortalLinkUnknown
from webhook_hub.models import PortalLink
from webhook_hub.portal.repository import PortalLinkRepository

LINK_PATH = "/portal/link/"
TOKEN_BYTES = 32


class LinkState(StrEnum):
    OPEN = "open"
    USED = "used"
    EXPIRED = "expired"


def link_state(link: PortalLink, now: datetime) -> LinkState:
    if link.used_at is not None:
        return LinkState.USED
    if link.expires_at <= now:
        return LinkState.EXPIRED
    return LinkState.OPEN


def portal_level(level: AccessLevel) -> AccessLevel:
    """The portal acts for one owner: an operator key's link gets an admin session (its
    cross-owner powers belong to the API and the CLI, not to a page)."""
    return AccessLevel.ADMIN if level is AccessLevel.OPERATOR else level


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def link_url(base_url: str, token: str) -> str:
    return f"{base_url.rstrip('/')}{LINK_PATH}{token}"


@dataclass(frozen=True)
class IssuedLink:
    token: str
    expires_at: datetime


class PortalLinkService:
    def __init__(self, session: AsyncSession) -> None:
        self.links = PortalLinkRepository(session)

    async def issue(self, owner: str, level: AccessLevel, ttl_seconds: int) -> IssuedLink:
        """A new link; the plaintext token exists only in this return value."""
        token = secrets.token_urlsafe(TOKEN_BYTES)
        expires_at = datetime.now(UTC) + timedelta(seconds=ttl_seconds)
        await self.links.add(
            PortalLink(
                token_hash=hash_token(token),
                owner=owner,
                level=portal_level(level).value,
                expires_at=expires_at,
            )
        )
        return IssuedLink(token, expires_at)

    async def check(self, token: str) -> PortalLink:
        """The open link, or the error page's reason (unknown, used, expired)."""
        link = await self.links.get(hash_token(token))
        if link is None:
            raise PortalLinkUnknown()
        state = link_state(link, datetime.now(UTC))
        if state is LinkState.USED:
            raise PortalLinkGone()
        if state is LinkState.EXPIRED:
            raise PortalLinkExpired()
        return link

    async def use(self, token: str) -> tuple[str, AccessLevel]:
        """Spend the link: its owner and level, once; afterwards the same errors as `check`."""
        claimed = await self.links.claim(hash_token(token), datetime.now(UTC))
        if claimed is None:
            await self.check(token)
            raise PortalLinkGone()  # claimed by a concurrent request between the two reads
        owner, level = claimed
        return owner, AccessLevel(level)
