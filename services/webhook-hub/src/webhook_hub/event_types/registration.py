"""Types registered by consumers over HTTP: owned by the registering owner, never a name a
service declares or another owner holds."""

from __future__ import annotations

from servicekit.errors import Conflict
from sqlmodel.ext.asyncio.session import AsyncSession

from webhook_hub.event_types.repository import EventTypeRepository
from webhook_hub.event_types.schemas import EventTypeRegistration
from webhook_hub.events import TEST_EVENT_TYPE, registry
from webhook_hub.models import EventType


class EventTypeTaken(Conflict):
    code = "event_type_taken"


class EventTypeRegistrar:
    def __init__(self, session: AsyncSession) -> None:
        self.event_types = EventTypeRepository(session)

    async def register(self, owner: str, body: EventTypeRegistration) -> tuple[EventType, bool]:
        """The owner's type and whether it is new; 409 when the name is not theirs to take."""
        taken = EventTypeTaken(
            f"Event type {body.name!r} belongs to a service or another consumer; choose "
            "another name"
        )
        if body.name == TEST_EVENT_TYPE or body.name in registry:
            raise taken
        registered = await self.event_types.register(
            owner, body.name, body.description, body.example_payload
        )
        if registered is None:
            raise taken
        return registered
