"""Request parameters that name database rows: bounded to Postgres `integer`, so an id out of
range is a 422 instead of a database error."""

from __future__ import annotations

from typing import Annotated

from fastapi import Path, Query

from servicekit.paging import MAX_DB_INT

__all__ = ["MAX_DB_INT", "DbId", "OptionalDbIdQuery"]

DbId = Annotated[int, Path(ge=1, le=MAX_DB_INT, description="A row id")]
OptionalDbIdQuery = Annotated[int | None, Query(ge=0, le=MAX_DB_INT)]
