"""The dashboard's one-time sign-in links: servicekit's sign-in links over `dashboard_links`."""

from __future__ import annotations

from servicekit.web.pages.links import SignInLinks
from sqlmodel.ext.asyncio.session import AsyncSession

from scraper_manager.models import DashboardLink

LINK_PATH = "/dashboard/link/"


def dashboard_links(session: AsyncSession) -> SignInLinks[DashboardLink]:
    return SignInLinks(session, DashboardLink, path=LINK_PATH, noun="dashboard link")
