"""What the deliveries' endpoints (and the portal's) get injected."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends
from servicekit.web_session import SessionDep

from webhook_hub.deliveries.service import DeliveryService


# `async def`: FastAPI runs a plain `def` dependency in its thread pool, a hand-off per
# request that cost the single-event endpoint more than the dependency itself.
async def get_delivery_service(session: SessionDep) -> DeliveryService:
    return DeliveryService(session)


DeliveryServiceDep = Annotated[DeliveryService, Depends(get_delivery_service)]
