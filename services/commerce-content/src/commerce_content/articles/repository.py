"""Queries on articles, their tags and comments."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date

from sqlalchemy import func
from sqlalchemy.orm import selectinload
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession
from sqlmodel.sql.expression import SelectOfScalar

from commerce_content.models import Article, ArticleStatus, Comment, Tag, User


class ArticleRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    def _filtered(
        self, status: ArticleStatus | None, author_id: int | None, created_after: date | None
    ) -> SelectOfScalar[Article]:
        statement = select(Article)
        if status is not None:
            statement = statement.where(Article.status == status)
        if author_id is not None:
            statement = statement.where(Article.author_id == author_id)
        if created_after is not None:
            statement = statement.where(func.date(Article.created_at) > created_after)
        return statement

    @staticmethod
    def _with(
        statement: SelectOfScalar[Article], include: Sequence[str]
    ) -> SelectOfScalar[Article]:
        # One extra query per relation, whatever the page size: no N+1.
        options = {
            "author": selectinload(Article.author),  # type: ignore[arg-type]
            "tags": selectinload(Article.tags),  # type: ignore[arg-type]
            "comments": selectinload(Article.comments),  # type: ignore[arg-type]
        }
        for name in include:
            statement = statement.options(options[name])
        return statement

    async def count(
        self, status: ArticleStatus | None, author_id: int | None, created_after: date | None
    ) -> int:
        statement = self._filtered(status, author_id, created_after)
        counted = select(func.count()).select_from(statement.subquery())
        return int((await self.session.exec(counted)).one())

    async def page(
        self,
        *,
        status: ArticleStatus | None,
        author_id: int | None,
        created_after: date | None,
        sort: str,
        descending: bool,
        offset: int,
        limit: int,
        include: Sequence[str],
    ) -> Sequence[Article]:
        column = getattr(Article, sort)
        order = column.desc().nulls_last() if descending else column.asc().nulls_last()
        statement = (
            self._with(self._filtered(status, author_id, created_after), include)
            .order_by(order, col(Article.id).desc() if descending else col(Article.id))
            .offset(offset)
            .limit(limit)
        )
        return (await self.session.exec(statement)).all()

    async def after(
        self,
        *,
        status: ArticleStatus | None,
        author_id: int | None,
        created_after: date | None,
        after_id: int,
        limit: int,
        include: Sequence[str],
    ) -> Sequence[Article]:
        statement = (
            self._with(self._filtered(status, author_id, created_after), include)
            .where(col(Article.id) > after_id)
            .order_by(col(Article.id))
            .limit(limit)
        )
        return (await self.session.exec(statement)).all()

    async def get(
        self, article_id: int, include: Sequence[str] = (), *, fresh: bool = False
    ) -> Article | None:
        """`fresh` reloads an article this session already holds (after a change), its
        relations included."""
        statement = self._with(select(Article).where(Article.id == article_id), include)
        if fresh:
            statement = statement.execution_options(populate_existing=True)
        return (await self.session.exec(statement)).first()

    async def slug_taken(self, slug: str, except_id: int | None = None) -> bool:
        statement = select(Article.id).where(Article.slug == slug)
        if except_id is not None:
            statement = statement.where(Article.id != except_id)
        return (await self.session.exec(statement)).first() is not None

    async def user_exists(self, user_id: int) -> bool:
        return (await self.session.get(User, user_id)) is not None

    async def tags_named(self, names: Sequence[str]) -> list[Tag]:
        if not names:
            return []
        existing = {
            tag.name: tag
            for tag in (await self.session.exec(select(Tag).where(col(Tag.name).in_(names)))).all()
        }
        for name in names:
            if name not in existing:
                tag = Tag(name=name)
                self.session.add(tag)
                existing[name] = tag
        await self.session.flush()
        return [existing[name] for name in names]

    async def comments(self, article_id: int) -> Sequence[Comment]:
        statement = (
            select(Comment).where(Comment.article_id == article_id).order_by(col(Comment.id))
        )
        return (await self.session.exec(statement)).all()
