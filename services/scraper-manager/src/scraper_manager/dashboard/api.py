"""`POST /api/v1/dashboard-links`: a one-time dashboard link for the calling key."""

from __future__ import annotations

from datetime import datetime, timedelta

from fastapi import APIRouter, Request, status
from pydantic import BaseModel, ConfigDict
from servicekit.auth.dependencies import ReadPrincipal
from servicekit.web.session import SessionDep

from scraper_manager.dashboard.links import dashboard_links
from scraper_manager.dependencies import SettingsDep
from scraper_manager.errors import AUTH, declared

router = APIRouter(tags=["dashboard"])


class DashboardLinkOut(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "url": "https://scrapers.example/dashboard/link/3q2-...",
                    "expires_at": "2026-11-22T10:15:00Z",
                }
            ]
        }
    )

    url: str
    expires_at: datetime


@router.post(
    "/dashboard-links",
    response_model=DashboardLinkOut,
    status_code=status.HTTP_201_CREATED,
    summary="A one-time dashboard link",
    description=(
        "A link that signs its first visitor in to the dashboard as the calling key's owner, "
        "at the key's level, until it expires (`DASHBOARD_LINK_MINUTES`). Any key may ask."
    ),
    responses=declared(*AUTH),
)
async def create_dashboard_link(
    principal: ReadPrincipal, session: SessionDep, settings: SettingsDep, request: Request
) -> DashboardLinkOut:
    base = settings.public_url or str(request.base_url)
    link = await dashboard_links(session).issue(
        principal.owner,
        principal.level,
        base_url=base,
        ttl=timedelta(minutes=settings.dashboard_link_minutes),
    )
    return DashboardLinkOut(url=link.url, expires_at=link.expires_at)
