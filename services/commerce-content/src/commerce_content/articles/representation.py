"""An article as each version shows it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from commerce_content.articles.schemas import (
    ArticleOut,
    ArticleOutV2,
    AuthorOut,
    CommentOut,
    TagOut,
)
from commerce_content.models import Article, Comment


def comment_out(comment: Comment) -> CommentOut:
    return CommentOut.model_validate(comment, from_attributes=True)


def render(article: Article, version: int, include: Sequence[str]) -> dict[str, Any]:
    comments = [comment_out(c) for c in article.comments] if "comments" in include else None
    if version == 2:
        return ArticleOutV2(
            id=article.id,
            title=article.title,
            slug=article.slug,
            content=article.body,
            status=article.status,
            author=AuthorOut(id=article.author.id, name=article.author.name),
            tags=[tag.name for tag in article.tags],
            created_at=article.created_at,
            updated_at=article.updated_at,
            published_at=article.published_at,
            comments=comments,
        ).model_dump(mode="json", exclude_none=False)
    out = ArticleOut(
        id=article.id,
        title=article.title,
        slug=article.slug,
        body=article.body,
        status=article.status,
        author_id=article.author_id,
        created_at=article.created_at,
        updated_at=article.updated_at,
        published_at=article.published_at,
        author=AuthorOut(id=article.author.id, name=article.author.name)
        if "author" in include
        else None,
        tags=[TagOut(id=t.id, name=t.name) for t in article.tags] if "tags" in include else None,
        comments=comments,
    )
    return out.model_dump(mode="json", exclude_none=False, exclude=_absent(include))


def _absent(include: Sequence[str]) -> set[str]:
    return {name for name in ("author", "tags", "comments") if name not in include}


def relations_for(version: int, include: Sequence[str]) -> list[str]:
    """What must be loaded: v2 always shows the author and the tags."""
    needed = list(include)
    if version == 2:
        needed += [name for name in ("author", "tags") if name not in needed]
    return needed
