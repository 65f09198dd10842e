"""What the OAuth2 token endpoint gets injected."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends
from servicekit.web_session import SessionDep

from scraper_manager.oauth.service import OAuthTokenService
from scraper_manager.settings import SettingsDep


def get_oauth_token_service(session: SessionDep, settings: SettingsDep) -> OAuthTokenService:
    return OAuthTokenService(session, settings)


OAuthTokenServiceDep = Annotated[OAuthTokenService, Depends(get_oauth_token_service)]
