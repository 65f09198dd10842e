"""Wire shapes of articles, in both representations (v1 and v2)."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator
from servicekit.web.params import MAX_DB_INT

from commerce_content.models import ArticleStatus

SLUG = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
INCLUDABLE = ("author", "tags", "comments")
SORTABLE = ("id", "title", "created_at", "updated_at", "published_at")
# A users row id: beyond Postgres `integer` the database would fail, not answer.
UserId = Annotated[int, Field(ge=1, le=MAX_DB_INT)]
# Constrained, so pydantic checks the text is valid Unicode (a lone surrogate is refused;
# plain `list[str]` items are not checked and would fail in the database).
TagName = Annotated[str, StringConstraints(min_length=1, max_length=100)]


def _tags(value: list[TagName] | None) -> list[str] | None:
    if value is None:
        return None
    cleaned: list[str] = []
    for tag in value:
        name = tag.strip().lower()
        if not 1 <= len(name) <= 100:
            raise ValueError("tags are 1 to 100 characters")
        if name not in cleaned:
            cleaned.append(name)
    return cleaned


def _slug(value: str | None) -> str | None:
    if value is not None and not SLUG.match(value):
        raise ValueError("slug is lowercase letters, digits and single hyphens")
    return value


class ArticleCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    title: str = Field(min_length=1, max_length=300)
    slug: str | None = Field(
        default=None, max_length=300, description="Made from the title if absent"
    )
    body: str = Field(default="", max_length=200_000)
    status: ArticleStatus = ArticleStatus.DRAFT
    author_id: UserId | None = Field(default=None, description="Defaults to the calling user")
    tags: list[TagName] = Field(default_factory=list, max_length=20)

    _check_tags = field_validator("tags")(_tags)
    _check_slug = field_validator("slug")(_slug)


class ArticleReplace(BaseModel):
    """PUT: the whole article; every field is required."""

    model_config = ConfigDict(extra="forbid")

    title: str = Field(min_length=1, max_length=300)
    slug: str = Field(min_length=1, max_length=300)
    body: str = Field(max_length=200_000)
    status: ArticleStatus
    author_id: UserId
    tags: list[TagName] = Field(max_length=20)

    _check_tags = field_validator("tags")(_tags)
    _check_slug = field_validator("slug")(_slug)


class ArticleUpdate(BaseModel):
    """PATCH: only the fields given change."""

    model_config = ConfigDict(extra="forbid")

    title: str | None = Field(default=None, min_length=1, max_length=300)
    slug: str | None = Field(default=None, min_length=1, max_length=300)
    body: str | None = Field(default=None, max_length=200_000)
    status: ArticleStatus | None = None
    author_id: UserId | None = None
    tags: list[TagName] | None = Field(default=None, max_length=20)

    _check_tags = field_validator("tags")(_tags)
    _check_slug = field_validator("slug")(_slug)


class AuthorOut(BaseModel):
    id: int
    name: str


class TagOut(BaseModel):
    id: int
    name: str


class CommentOut(BaseModel):
    id: int
    article_id: int
    author_name: str
    body: str
    created_at: datetime


class CommentCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    body: str = Field(min_length=1, max_length=10_000)
    author_name: str | None = Field(default=None, min_length=1, max_length=200)


class ArticleOut(BaseModel):
    """v1: `body`, `author_id`; relations only when `include` names them."""

    id: int
    title: str
    slug: str
    body: str
    status: ArticleStatus
    author_id: int
    created_at: datetime
    updated_at: datetime
    published_at: datetime | None
    author: AuthorOut | None = None
    tags: list[TagOut] | None = None
    comments: list[CommentOut] | None = None


class ArticleOutV2(BaseModel):
    """v2: `content` instead of `body`, the author always embedded, tags as plain names."""

    id: int
    title: str
    slug: str
    content: str
    status: ArticleStatus
    author: AuthorOut
    tags: list[str]
    created_at: datetime
    updated_at: datetime
    published_at: datetime | None
    comments: list[CommentOut] | None = None


class Single(BaseModel):
    data: dict[str, Any]


class PageLinks(BaseModel):
    self: str
    first: str
    prev: str | None
    next: str | None
    last: str


class ListMeta(BaseModel):
    total: int | None = None
    page: int | None = None
    per_page: int | None = None
    links: PageLinks | None = None
    limit: int | None = None
    next_after_id: int | None = None


class ListEnvelope(BaseModel):
    data: list[dict[str, Any]]
    meta: ListMeta


class SingleEnvelope(BaseModel):
    data: dict[str, Any]
