"""Request parameters that name database rows: bounded to Postgres `integer`, so an id out of
range is a 422 (or a 400 for a cursor) instead of a database error."""

from __future__ import annotations

from typing import Annotated

from fastapi import Path, Query

from servicekit.web.errors import BadRequest

MAX_DB_INT = 2_147_483_647

DbId = Annotated[int, Path(ge=1, le=MAX_DB_INT, description="A row id")]
OptionalDbIdQuery = Annotated[int | None, Query(ge=0, le=MAX_DB_INT)]


def id_cursor(cursor: str | None) -> int | None:
    """Cursors that are row ids in text: anything else was not issued by the API."""
    if cursor is None:
        return None
    # isascii: "²" passes isdigit() but not int().
    if not (cursor.isascii() and cursor.isdigit()) or len(cursor) > 10 or int(cursor) > MAX_DB_INT:
        raise BadRequest("cursor is not one this API returned")
    return int(cursor)
