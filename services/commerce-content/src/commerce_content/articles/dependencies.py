"""What the articles' endpoints get injected."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends
from servicekit.web_session import SessionDep

from commerce_content.articles.service import ArticleService


async def get_article_service(session: SessionDep) -> ArticleService:
    return ArticleService(session)


ArticleServiceDep = Annotated[ArticleService, Depends(get_article_service)]
