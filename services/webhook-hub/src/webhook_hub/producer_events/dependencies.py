"""What the producer events' endpoints get injected."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

from fastapi import Depends
from servicekit.web_session import SessionDep

from webhook_hub.producer_events.service import ProducerEventService
from webhook_hub.settings import SettingsDep


# `async def`: FastAPI runs a plain `def` dependency in its thread pool, a hand-off per
# request that cost the single-event endpoint more than the dependency itself.
async def get_producer_event_service(
    session: SessionDep, settings: SettingsDep
) -> ProducerEventService:
    return ProducerEventService(session, timedelta(hours=settings.idempotency_window_hours))


ProducerEventServiceDep = Annotated[ProducerEventService, Depends(get_producer_event_service)]
