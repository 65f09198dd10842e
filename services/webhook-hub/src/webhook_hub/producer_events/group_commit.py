"""The single form's group commit: concurrent `POST /webhooks/events` of one API process are
judged and written together, as one batch of the batch form's code (`submit_each`), in one
transaction: one read of their types, one claim of their keys per owner, one insert of their
outbox rows, one COMMIT (and one fsync) for all of them, where each request paid its own.

A request is answered once its flush has committed (202 with its id, or its own refusal); a
flush the database could not take answers each of its requests 503 `event_not_recorded`,
never 202. See `servicekit.group_commit` for how flushes form and how one bad item is found.
"""

from __future__ import annotations

import contextvars
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta

from fastapi import FastAPI, Request
from servicekit.auth.dependencies import Principal
from servicekit.group_commit import GroupCommit
from servicekit.runtime import ServiceRuntime
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession

from webhook_hub.errors import EventNotRecorded
from webhook_hub.producer_events.schemas import EventSubmission
from webhook_hub.producer_events.service import (
    Outcome,
    ProducerEventService,
    Refused,
    Submission,
)
from webhook_hub.settings import Settings


@dataclass(frozen=True, slots=True)
class _Pending:
    principal: Principal
    submission: Submission
    # The request's context, so its event's outbox record span is the request's child.
    context: contextvars.Context


class SingleEvents:
    """Submits one event at a time for its caller, written with whatever else is pending."""

    def __init__(
        self, sessions: async_sessionmaker[AsyncSession], window: timedelta, max_items: int
    ) -> None:
        self._sessions = sessions
        self._window = window
        self.commits: GroupCommit[_Pending, Outcome] = GroupCommit(
            self._flush, max_items=max_items, on_outage=lambda _: EventNotRecorded()
        )

    async def submit(
        self, principal: Principal, event: EventSubmission, idempotency_key: str | None
    ) -> tuple[uuid.UUID, bool]:
        """The event's id, and whether it is new (False: the key was seen inside the window);
        the error of a refused event raised, as `ProducerEventService.submit`."""
        pending = _Pending(
            principal, Submission(event, idempotency_key), contextvars.copy_context()
        )
        outcome = await self.commits.submit(pending)
        if isinstance(outcome, Refused):
            raise outcome.error
        return outcome.id, outcome.fresh

    async def _flush(self, items: Sequence[_Pending]) -> list[Outcome]:
        async with self._sessions() as session, session.begin():
            service = ProducerEventService(session, self._window)
            return await service.submit_each(
                [(item.principal, item.submission) for item in items],
                contexts=[item.context for item in items],
            )


@asynccontextmanager
async def single_events(app: FastAPI, runtime: ServiceRuntime) -> AsyncIterator[None]:
    """The API process's group commit, for its lifetime; what is queued at shutdown is
    written before the database engine closes."""
    settings: Settings = app.state.settings
    events = SingleEvents(
        runtime.session_factory,
        timedelta(hours=settings.idempotency_window_hours),
        settings.event_group_commit_max,
    )
    app.state.single_events = events
    try:
        yield
    finally:
        await events.commits.close()


async def get_single_events(request: Request) -> SingleEvents:
    events: SingleEvents = request.app.state.single_events
    return events
