"""Search: case-insensitive, at most 5 records per collection, `%` and `_` taken literally."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

from servicekit.db.like import contains_pattern
from sqlalchemy import text
from sqlmodel.ext.asyncio.session import AsyncSession

from commerce_content.errors import InvalidRequest

COLLECTIONS = ("posts", "products", "pages")
PER_COLLECTION = 5
MIN_QUERY_LENGTH = 2

# The trigram GIN indexes on title/name and description serve these ILIKE matches.
_QUERIES = {
    "posts": text(
        "SELECT id, title, slug, description, created_at FROM posts"
        " WHERE published AND (title ILIKE :pattern ESCAPE '\\' OR description ILIKE :pattern ESCAPE '\\')"
        " ORDER BY id LIMIT :limit"
    ),
    "pages": text(
        "SELECT id, title, slug, description, created_at FROM pages"
        " WHERE published AND (title ILIKE :pattern ESCAPE '\\' OR description ILIKE :pattern ESCAPE '\\')"
        " ORDER BY id LIMIT :limit"
    ),
    "products": text(
        "SELECT id, name AS title, slug, description, base_price, sale_price, currency, image"
        " FROM products WHERE published AND NOT deleted"
        " AND (name ILIKE :pattern ESCAPE '\\' OR description ILIKE :pattern ESCAPE '\\')"
        " ORDER BY menu_index, id LIMIT :limit"
    ),
}


def _json_safe(row: dict[str, Any]) -> dict[str, Any]:
    """Timestamps as ISO 8601, money as decimal strings (never floats)."""
    safe: dict[str, Any] = {}
    for key, value in row.items():
        if isinstance(value, datetime):
            safe[key] = value.isoformat()
        elif isinstance(value, Decimal):
            safe[key] = str(value)
        else:
            safe[key] = value
    return safe


async def search(
    session: AsyncSession, query: str, collections: tuple[str, ...]
) -> list[dict[str, Any]]:
    connection = await session.connection()
    docs: list[dict[str, Any]] = []
    for collection in collections:
        rows = await connection.execute(
            _QUERIES[collection], {"pattern": contains_pattern(query), "limit": PER_COLLECTION}
        )
        docs += [{**_json_safe(dict(row._mapping)), "_collection": collection} for row in rows]
    return docs


class SearchService:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def search(self, query: str | None, kind: str) -> list[dict[str, Any]]:
        """`kind` is `all` or one collection; a query under 2 characters finds nothing."""
        if kind != "all" and kind not in COLLECTIONS:
            raise InvalidRequest(f"Unknown type '{kind}'; use all, {', '.join(COLLECTIONS)}")
        if query is None or len(query.strip()) < MIN_QUERY_LENGTH:
            return []
        return await search(self.session, query.strip(), COLLECTIONS if kind == "all" else (kind,))
