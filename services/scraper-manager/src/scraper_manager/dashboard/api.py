"""`POST /api/v1/dashboard-links`: a one-time dashboard link for the calling key, with an
optional lifetime as webhook-hub's `POST /webhooks/portal-links` takes it."""

from __future__ import annotations

from datetime import datetime

from fastapi import APIRouter, Request, status
from pydantic import BaseModel, ConfigDict, Field
from servicekit.auth.dependencies import ReadPrincipal
from servicekit.web.pages.links import MAX_LINK_TTL_SECONDS, MIN_LINK_TTL_SECONDS
from servicekit.web_session import SessionDep

from scraper_manager.dashboard.links import dashboard_links, link_ttl
from scraper_manager.errors import AUTH, LinkNeedsApiKey, RequestInvalid, declared
from scraper_manager.settings import SettingsDep

router = APIRouter(tags=["dashboard"])


class DashboardLinkCreate(BaseModel):
    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"ttl_seconds": 3600}]}
    )

    ttl_seconds: int | None = Field(
        default=None,
        ge=MIN_LINK_TTL_SECONDS,
        le=MAX_LINK_TTL_SECONDS,
        description="How long the link may be opened (once): 60 s to 24 h; without it, the "
        "operator's `DASHBOARD_LINK_MINUTES` (default 15 min)",
    )


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
        "at the key's level, until it expires: after `ttl_seconds` (60 s to 24 h, as "
        "webhook-hub's portal links) or, without it, the operator's "
        "`DASHBOARD_LINK_MINUTES` (default 15 min). Any key may ask. The link, and the "
        "session it opens, end when the key is revoked or given another level."
    ),
    responses=declared(*AUTH, RequestInvalid, LinkNeedsApiKey),
)
async def create_dashboard_link(
    principal: ReadPrincipal,
    session: SessionDep,
    settings: SettingsDep,
    request: Request,
    body: DashboardLinkCreate | None = None,
) -> DashboardLinkOut:
    if principal.key_id is None:
        raise LinkNeedsApiKey()
    base = settings.public_url or str(request.base_url)
    link = await dashboard_links(session).issue(
        principal.owner,
        principal.level,
        base_url=base,
        ttl=link_ttl(body.ttl_seconds if body else None, settings.dashboard_link_minutes),
        api_key_id=principal.key_id,
    )
    return DashboardLinkOut(url=link.url, expires_at=link.expires_at)
