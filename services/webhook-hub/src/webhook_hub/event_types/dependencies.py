"""What the event types' endpoints (and the portal's) get injected."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends
from servicekit.web_session import SessionDep

from webhook_hub.event_types.service import EventTypeService


# `async def`: FastAPI runs a plain `def` dependency in its thread pool, a hand-off per
# request that cost the single-event endpoint more than the dependency itself.
async def get_event_type_service(session: SessionDep) -> EventTypeService:
    return EventTypeService(session)


EventTypeServiceDep = Annotated[EventTypeService, Depends(get_event_type_service)]
