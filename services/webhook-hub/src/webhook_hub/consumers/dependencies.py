"""What the consumers' endpoints get injected."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends
from servicekit.web_session import SessionDep

from webhook_hub.consumers.service import ConsumerService


# `async def`: FastAPI runs a plain `def` dependency in its thread pool, a hand-off per
# request that cost the single-event endpoint more than the dependency itself.
async def get_consumer_service(session: SessionDep) -> ConsumerService:
    return ConsumerService(session)


ConsumerServiceDep = Annotated[ConsumerService, Depends(get_consumer_service)]
