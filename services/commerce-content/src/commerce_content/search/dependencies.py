"""What the search endpoint gets injected."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends
from servicekit.web_session import SessionDep

from commerce_content.search.service import SearchService


async def get_search_service(session: SessionDep) -> SearchService:
    return SearchService(session)


SearchServiceDep = Annotated[SearchService, Depends(get_search_service)]
