"""What endpoints get injected."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from servicekit.web.session import SessionDep

from scraper_manager.scrapers.service import ScraperService
from scraper_manager.settings import Settings


def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def get_scraper_service(session: SessionDep, request: Request) -> ScraperService:
    return ScraperService(session, request.app.state.settings)


SettingsDep = Annotated[Settings, Depends(get_settings)]
ScraperServiceDep = Annotated[ScraperService, Depends(get_scraper_service)]
