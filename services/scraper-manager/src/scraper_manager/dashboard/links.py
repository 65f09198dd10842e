"""One-time sign-in links: a random token handed out once, its SHA-256 stored, redeemed at
most once before it expires (an atomic UPDATE: two clicks cannot both sign in)."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from servicekit.auth import AccessLevel
from sqlmodel import col, update
from sqlmodel.ext.asyncio.session import AsyncSession

from scraper_manager.models import DashboardLink

LINK_PATH = "/dashboard/link/"


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class IssuedLink:
    url: str
    expires_at: datetime


@dataclass(frozen=True)
class Redeemed:
    owner: str
    level: AccessLevel


class DashboardLinkService:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def issue(
        self, owner: str, level: AccessLevel, *, base_url: str, ttl: timedelta, now: datetime
    ) -> IssuedLink:
        token = secrets.token_urlsafe(32)
        link = DashboardLink(
            token_hash=hash_token(token), owner=owner, level=level.value, expires_at=now + ttl
        )
        self.session.add(link)
        await self.session.flush()
        return IssuedLink(f"{base_url.rstrip('/')}{LINK_PATH}{token}", link.expires_at)

    async def redeem(self, token: str, now: datetime) -> Redeemed | None:
        """The link's owner and level if it is unused and unexpired; it is used up either way."""
        statement = (
            update(DashboardLink)
            .where(
                col(DashboardLink.token_hash) == hash_token(token),
                col(DashboardLink.used_at).is_(None),
                col(DashboardLink.expires_at) > now,
            )
            .values(used_at=now)
            .returning(col(DashboardLink.owner), col(DashboardLink.level))
        )
        row = (await self.session.exec(statement)).first()
        if row is None:
            return None
        return Redeemed(str(row[0]), AccessLevel(row[1]))
