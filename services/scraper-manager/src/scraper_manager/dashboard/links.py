"""The dashboard's one-time sign-in links: servicekit's sign-in links over `dashboard_links`."""

from __future__ import annotations

from datetime import timedelta

from servicekit.web.pages.links import SignInLinks
from servicekit.web_session import SessionDep
from sqlmodel.ext.asyncio.session import AsyncSession

from scraper_manager.models import DashboardLink

LINK_PATH = "/dashboard/link/"


def link_ttl(requested_seconds: int | None, default_minutes: int) -> timedelta:
    """The lifetime asked for (already within the bounds), else the operator's default."""
    if requested_seconds is None:
        return timedelta(minutes=default_minutes)
    return timedelta(seconds=requested_seconds)


def dashboard_links(session: AsyncSession) -> SignInLinks[DashboardLink]:
    return SignInLinks(session, DashboardLink, path=LINK_PATH, noun="dashboard link")


async def get_dashboard_links(session: SessionDep) -> SignInLinks[DashboardLink]:
    """The sign-in pages' dependency: the links over the request's session."""
    return dashboard_links(session)
