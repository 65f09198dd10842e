"""What the run log's endpoints get injected."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from servicekit.web_session import SessionDep

from scraper_manager.runlog.service import RunLogService


def get_run_log_service(session: SessionDep, request: Request) -> RunLogService:
    return RunLogService(session, request.app.state.session_factory)


RunLogServiceDep = Annotated[RunLogService, Depends(get_run_log_service)]
