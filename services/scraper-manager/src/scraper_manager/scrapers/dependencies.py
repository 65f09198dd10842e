"""What the scrapers' endpoints get injected."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends
from servicekit.web_session import SessionDep

from scraper_manager.scrapers.service import ScraperService
from scraper_manager.settings import SettingsDep


def get_scraper_service(session: SessionDep, settings: SettingsDep) -> ScraperService:
    return ScraperService(session, settings)


ScraperServiceDep = Annotated[ScraperService, Depends(get_scraper_service)]
