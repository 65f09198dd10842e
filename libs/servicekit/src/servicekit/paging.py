"""Keyset paging, written once: opaque cursors and the page a repository's `limit + 1` rows
make. Framework-free; a cursor the API did not issue is an `InvalidCursor` (400)."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Generic, TypeVar

from servicekit.errors import InvalidCursor

MAX_DB_INT = 2_147_483_647
DEFAULT_PAGE_SIZE = 20
MAX_PAGE_SIZE = 100

T = TypeVar("T")


@dataclass(frozen=True)
class Page(Generic[T]):
    items: list[T]
    next_cursor: str | None


def page_of(rows: Sequence[T], limit: int, cursor_of: Callable[[T], str]) -> Page[T]:
    """`rows` were fetched with `limit + 1`: the extra row only says another page exists, and
    the cursor is the last row shown."""
    items = list(rows[:limit])
    has_more = len(rows) > limit and bool(items)
    return Page(items, cursor_of(items[-1]) if has_more else None)


def encode_time_id_cursor(created_at: datetime, row_id: uuid.UUID) -> str:
    """A cursor over (created_at, id), for tables keyed by UUID and listed newest first."""
    raw = json.dumps([created_at.isoformat(), str(row_id)]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_time_id_cursor(cursor: str | None) -> tuple[datetime, uuid.UUID] | None:
    if cursor is None:
        return None
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        created, row_id = json.loads(base64.urlsafe_b64decode(padded.encode()))
        return datetime.fromisoformat(created), uuid.UUID(row_id)
    except (ValueError, TypeError) as exc:
        raise InvalidCursor() from exc


def decode_id_cursor(cursor: str | None) -> int | None:
    """Cursors that are integer row ids in text: anything else was not issued by the API."""
    if cursor is None:
        return None
    # isascii: "²" passes isdigit() but not int().
    if not (cursor.isascii() and cursor.isdigit()) or len(cursor) > 10 or int(cursor) > MAX_DB_INT:
        raise InvalidCursor()
    return int(cursor)
