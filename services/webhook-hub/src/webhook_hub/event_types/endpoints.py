"""`GET /webhooks/event-types`."""

from __future__ import annotations

from fastapi import APIRouter
from servicekit.auth.dependencies import ReadPrincipal
from servicekit.db.engine import SessionDep

from webhook_hub.errors import AUTH_ERRORS
from webhook_hub.event_types.repository import EventTypeRepository
from webhook_hub.event_types.schemas import EventTypeList, EventTypeRead

router = APIRouter(prefix="/event-types", tags=["event-types"])


@router.get("", response_model=EventTypeList, response_model_by_alias=True, responses=AUTH_ERRORS)
async def list_event_types(principal: ReadPrincipal, session: SessionDep) -> EventTypeList:
    """Every type any service can emit, with its example payload and JSON schema. Only active
    types may be subscribed to."""
    rows = await EventTypeRepository(session).list_all()
    return EventTypeList(data=[EventTypeRead.of(row) for row in rows])
