"""What the runs' endpoints get injected."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from servicekit.web_session import SessionDep

from scraper_manager.runs.service import RunService


def get_run_service(session: SessionDep, request: Request) -> RunService:
    # Exports stream after the request's session closed: they read through the factory.
    return RunService(session, request.app.state.session_factory)


RunServiceDep = Annotated[RunService, Depends(get_run_service)]
