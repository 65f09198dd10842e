"""The portal's one-time links: servicekit's sign-in links over `portal_links`; the portal's
own rule is the level a link may carry."""

from __future__ import annotations

from servicekit.auth.api_keys import AccessLevel
from servicekit.web.pages.links import SignInLinks
from sqlmodel.ext.asyncio.session import AsyncSession

from webhook_hub.models import PortalLink

LINK_PATH = "/portal/link/"


def portal_level(level: AccessLevel) -> AccessLevel:
    """The portal acts for one owner: an operator key's link gets an admin session (its
    cross-owner powers belong to the API and the CLI, not to a page)."""
    return AccessLevel.ADMIN if level is AccessLevel.OPERATOR else level


def portal_links(session: AsyncSession) -> SignInLinks[PortalLink]:
    return SignInLinks(
        session, PortalLink, path=LINK_PATH, noun="portal link", level_of=portal_level
    )
