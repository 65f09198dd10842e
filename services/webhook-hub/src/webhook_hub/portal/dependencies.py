"""What the portal's pages and link endpoint get injected besides the domains' services."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends
from servicekit.web.pages.links import SignInLinks
from servicekit.web_session import SessionDep

from webhook_hub.models import PortalLink
from webhook_hub.portal.service import portal_links


# `async def`: FastAPI runs a plain `def` dependency in its thread pool, a hand-off per
# request that cost the single-event endpoint more than the dependency itself.
async def get_portal_link_service(session: SessionDep) -> SignInLinks[PortalLink]:
    return portal_links(session)


PortalLinkServiceDep = Annotated[SignInLinks[PortalLink], Depends(get_portal_link_service)]
