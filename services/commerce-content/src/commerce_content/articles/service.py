"""The rules of articles: unique slugs, existing authors, who may write, what events follow."""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

from servicekit.events import record_event
from servicekit.paging import DEFAULT_PAGE_SIZE, Page, page_of
from sqlmodel.ext.asyncio.session import AsyncSession

from commerce_content.articles.repository import ArticleRepository
from commerce_content.articles.schemas import (
    SORTABLE,
    ArticleCreate,
    ArticleReplace,
    ArticleUpdate,
    CommentCreate,
)
from commerce_content.errors import (
    InvalidRequest,
    NoSuchThing,
    SlugTaken,
    UnknownAuthor,
)
from commerce_content.events import (
    ARTICLE_CREATED,
    ARTICLE_DELETED,
    ARTICLE_UPDATED,
    ArticleChanged,
)
from commerce_content.identity.dependencies import Caller
from commerce_content.models import Article, ArticleStatus, Comment


@dataclass(frozen=True)
class ArticleQuery:
    """A list request: filters, and either keyset (`after_id`, `limit`: by id) or offset
    (`page`, `per_page`, `sort`, `order`) paging."""

    status: ArticleStatus | None = None
    author_id: int | None = None
    created_after: str | None = None
    sort: str | None = None
    order: str | None = None
    page: int | None = None
    per_page: int | None = None
    after_id: int | None = None
    limit: int | None = None

    @property
    def keyset(self) -> bool:
        return self.after_id is not None or self.limit is not None


@dataclass(frozen=True)
class OffsetPage:
    articles: Sequence[Article]
    total: int
    page: int
    per_page: int

    @property
    def last(self) -> int:
        return max(1, math.ceil(self.total / self.per_page))


def slugify(title: str) -> str:
    ascii_title = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode()
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_title.lower()).strip("-")
    return slug[:300] or "article"


class ArticleService:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session
        self.articles = ArticleRepository(session)

    async def get(
        self, article_id: int, include: Sequence[str] = (), fresh: bool = False
    ) -> Article:
        article = await self.articles.get(article_id, include, fresh=fresh)
        if article is None:
            raise NoSuchThing(f"Article {article_id} not found")
        return article

    async def list_keyset(self, query: ArticleQuery, include: Sequence[str]) -> Page[Article]:
        since = self._check_list(query)
        if query.page is not None or query.per_page is not None or query.sort is not None:
            raise InvalidRequest(
                "Keyset paging (after_id, limit) orders by id; drop page, per_page, sort"
            )
        size = query.limit or DEFAULT_PAGE_SIZE
        rows = await self.articles.after(
            status=query.status,
            author_id=query.author_id,
            created_after=since,
            after_id=query.after_id or 0,
            limit=size + 1,
            include=include,
        )
        return page_of(rows, size, lambda article: str(article.id))

    async def list_offset(self, query: ArticleQuery, include: Sequence[str]) -> OffsetPage:
        since = self._check_list(query)
        size = query.per_page or DEFAULT_PAGE_SIZE
        number = query.page or 1
        total = await self.articles.count(query.status, query.author_id, since)
        rows = await self.articles.page(
            status=query.status,
            author_id=query.author_id,
            created_after=since,
            sort=query.sort or "id",
            descending=query.order == "desc",
            offset=(number - 1) * size,
            limit=size,
            include=include,
        )
        return OffsetPage(rows, total, number, size)

    @staticmethod
    def _check_list(query: ArticleQuery) -> date | None:
        try:
            since = parse_created_after(query.created_after)
        except ValueError as exc:
            raise InvalidRequest(str(exc)) from exc
        if query.sort is not None and query.sort not in SORTABLE:
            raise InvalidRequest(f"Cannot sort by '{query.sort}'; allowed: {', '.join(SORTABLE)}")
        if query.order is not None and query.order not in ("asc", "desc"):
            raise InvalidRequest("order must be asc or desc")
        return since

    async def _check_author(self, author_id: int) -> None:
        if not await self.articles.user_exists(author_id):
            raise UnknownAuthor(f"Author {author_id} does not exist")

    async def _check_slug(self, slug: str, except_id: int | None = None) -> None:
        if await self.articles.slug_taken(slug, except_id):
            raise SlugTaken(f"The slug '{slug}' is already used by another article")

    async def create(self, body: ArticleCreate, caller: Caller) -> Article:
        author_id = body.author_id if body.author_id is not None else caller.user_id
        if author_id is None:
            raise UnknownAuthor("author_id is required when the caller is not a user")
        await self._check_author(author_id)
        slug = body.slug or slugify(body.title)
        await self._check_slug(slug)
        now = datetime.now(UTC)
        article = Article(
            title=body.title,
            slug=slug,
            body=body.body,
            status=body.status,
            author_id=author_id,
            created_at=now,
            updated_at=now,
            published_at=now if body.status is ArticleStatus.PUBLISHED else None,
        )
        article.tags = await self.articles.tags_named(body.tags)
        self.session.add(article)
        await self.session.flush()
        await self._record(ARTICLE_CREATED, article)
        return article

    async def replace(
        self, article_id: int, body: ArticleReplace, include: Sequence[str] = ()
    ) -> Article:
        return await self._apply(article_id, body.model_dump(), include)

    async def update(
        self, article_id: int, body: ArticleUpdate, include: Sequence[str] = ()
    ) -> Article:
        return await self._apply(article_id, body.model_dump(exclude_unset=True), include)

    async def create_loaded(
        self, body: ArticleCreate, caller: Caller, include: Sequence[str]
    ) -> Article:
        """Create, then read back with the relations the answer shows."""
        article = await self.create(body, caller)
        return await self.get(article.id, include)

    async def _apply(
        self, article_id: int, changes: dict[str, Any], include: Sequence[str]
    ) -> Article:
        article = await self.get(article_id, ["tags"])
        if changes.get("author_id") is not None:
            await self._check_author(changes["author_id"])
        if changes.get("slug") is not None:
            await self._check_slug(changes["slug"], article_id)
        for field in ("title", "slug", "body", "status", "author_id"):
            if changes.get(field) is not None:
                setattr(article, field, changes[field])
        if changes.get("tags") is not None:
            article.tags = await self.articles.tags_named(changes["tags"])
        if article.status is ArticleStatus.PUBLISHED and article.published_at is None:
            article.published_at = datetime.now(UTC)
        article.updated_at = datetime.now(UTC)
        self.session.add(article)
        await self.session.flush()
        await self._record(ARTICLE_UPDATED, article)
        return await self.get(article_id, include, fresh=True)

    async def delete(self, article_id: int) -> None:
        article = await self.get(article_id)
        await self._record(ARTICLE_DELETED, article)
        await self.session.delete(article)
        await self.session.flush()

    async def comments(self, article_id: int) -> Sequence[Comment]:
        await self.get(article_id)
        return await self.articles.comments(article_id)

    async def add_comment(self, article_id: int, body: CommentCreate, caller: Caller) -> Comment:
        await self.get(article_id)
        comment = Comment(
            article_id=article_id,
            author_name=body.author_name or caller.subject,
            user_id=caller.user_id,
            body=body.body,
        )
        self.session.add(comment)
        await self.session.flush()
        return comment

    async def _record(self, event_type: str, article: Article) -> None:
        await record_event(
            self.session,
            event_type,
            ArticleChanged(
                id=article.id,
                slug=article.slug,
                title=article.title,
                status=article.status,
                author_id=article.author_id,
            ),
        )


def parse_created_after(value: str | None) -> date | None:
    if value is None:
        return None
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
        raise ValueError("created_after must be a date of the form YYYY-MM-DD")
    return date.fromisoformat(value)
