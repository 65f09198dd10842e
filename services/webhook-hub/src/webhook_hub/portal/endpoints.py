"""`POST /webhooks/portal-links`: a one-time portal link for the calling key's owner."""

from __future__ import annotations

from datetime import timedelta

from fastapi import APIRouter, Request, status
from servicekit.auth.dependencies import ReadPrincipal

from webhook_hub.errors import AUTH, BODY, declared
from webhook_hub.portal.dependencies import PortalLinkServiceDep
from webhook_hub.portal.schemas import PortalLinkCreate, PortalLinkCreated
from webhook_hub.portal.service import portal_level
from webhook_hub.settings import SettingsDep

router = APIRouter(prefix="/portal-links", tags=["portal"])


@router.post(
    "",
    response_model=PortalLinkCreated,
    status_code=status.HTTP_201_CREATED,
    responses=declared(*AUTH, *BODY),
    summary="Create a one-time portal link",
)
async def create_portal_link(
    request: Request,
    principal: ReadPrincipal,
    service: PortalLinkServiceDep,
    settings: SettingsDep,
    body: PortalLinkCreate | None = None,
) -> PortalLinkCreated:
    """A link your backend hands to your people: opened once before `expires_at` (default
    1 h, at most 24 h), it signs the browser in to the portal for your owner, at your key's
    level (a read key's link sees everything and changes nothing). Only the token's hash is
    stored; a used or expired link shows a page saying so. The link and the session it opens
    end when your key is revoked or given another level."""
    ttl = (body or PortalLinkCreate()).ttl_seconds
    issued = await service.issue(
        principal.owner,
        portal_level(principal.level),
        base_url=settings.public_url or str(request.base_url),
        ttl=timedelta(seconds=ttl),
        api_key_id=principal.key_id,
    )
    return PortalLinkCreated(url=issued.url, expires_at=issued.expires_at)
