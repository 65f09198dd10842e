"""Change detection: a successful run's items against the previous successful run's, by the
scraper's `item_key`, computed by PostgreSQL in one set-based statement (the worker holds no
items in memory, however many there are) and stored in `run_changes`.

An item is its stored object with the page `url` added when it has none (as the exports show
it), and its key is that object's `item_key` field as text (`->>`: a number 7 and a string
"7" are one key). Items without a key value (null or missing) cannot be matched and are left
out, counted as `unkeyed`. When a run holds several items with one key, the last one in crawl
order wins and the others are counted as `duplicates`: a listing seen on two pages is one
listing, and its latest state is what the crawl saw last."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from scraper_manager.models import ChangeKind, RunChange, RunStatus

# The previous successful run of the scraper, the one a run is compared with.
_PREVIOUS = text(
    """
    SELECT id FROM runs
    WHERE scraper_id = :scraper_id AND status = :completed AND id < :run_id
    ORDER BY id DESC LIMIT 1
    """
)
# Each run's items by key, the last one of a key winning; then the full outer join of the
# two, kept where a side is missing or the objects differ (jsonb equality: key order and
# spacing do not matter). For a changed item, the fields whose values differ, old and new.
_DIFF = text(
    """
    WITH cur AS (
        SELECT DISTINCT ON (k) k, item FROM (
            SELECT i.id, jsonb_build_object('url', i.url) || i.data AS item FROM items AS i
            WHERE i.run_id = :run_id
        ) AS s, LATERAL (SELECT s.item ->> CAST(:key AS text) AS k) AS kk
        WHERE k IS NOT NULL
        ORDER BY k, s.id DESC
    ), prev AS (
        SELECT DISTINCT ON (k) k, item FROM (
            SELECT i.id, jsonb_build_object('url', i.url) || i.data AS item FROM items AS i
            WHERE i.run_id = :previous_id
        ) AS s, LATERAL (SELECT s.item ->> CAST(:key AS text) AS k) AS kk
        WHERE k IS NOT NULL
        ORDER BY k, s.id DESC
    ), inserted AS (
        INSERT INTO run_changes (run_id, kind, key, item, fields)
        SELECT :run_id,
               CASE WHEN p.k IS NULL THEN 'added' WHEN c.k IS NULL THEN 'removed'
                    ELSE 'changed' END,
               coalesce(c.k, p.k),
               coalesce(c.item, p.item),
               CASE WHEN c.k IS NOT NULL AND p.k IS NOT NULL THEN (
                   SELECT jsonb_object_agg(f, jsonb_build_object('old', p.item -> f,
                                                                 'new', c.item -> f))
                   FROM (SELECT jsonb_object_keys(c.item)
                         UNION SELECT jsonb_object_keys(p.item)) AS names(f)
                   WHERE (c.item -> f) IS DISTINCT FROM (p.item -> f)
               ) END
        FROM cur AS c FULL OUTER JOIN prev AS p ON c.k = p.k
        WHERE c.k IS NULL OR p.k IS NULL OR c.item <> p.item
        ORDER BY coalesce(c.k, p.k)
        RETURNING kind
    )
    SELECT kind, count(*) FROM inserted GROUP BY kind
    """
)
_KEYS = text(
    """
    SELECT count(*) FILTER (WHERE k IS NULL), count(k) - count(DISTINCT k)
    FROM (SELECT (jsonb_build_object('url', url) || data) ->> CAST(:key AS text) AS k
          FROM items WHERE run_id = :run_id) AS s
    """
)


async def previous_successful_run(
    connection: AsyncConnection, scraper_id: int, run_id: int
) -> int | None:
    found = await connection.scalar(
        _PREVIOUS,
        {"scraper_id": scraper_id, "run_id": run_id, "completed": RunStatus.COMPLETED},
    )
    return None if found is None else int(found)


async def detect_changes(
    connection: AsyncConnection, *, scraper_id: int, run_id: int, item_key: str
) -> dict[str, Any]:
    """Store the run's changes against the previous successful run and answer its counts:
    `{compared_run_id, added, removed, changed, duplicates, unkeyed}`. The first run with a
    key (no previous successful run) is the baseline: `compared_run_id` null, no changes."""
    unkeyed, duplicates = (
        await connection.execute(_KEYS, {"run_id": run_id, "key": item_key})
    ).one()
    counts: dict[str, Any] = {
        "compared_run_id": None,
        "added": 0,
        "removed": 0,
        "changed": 0,
        "duplicates": int(duplicates or 0),
        "unkeyed": int(unkeyed or 0),
    }
    previous = await previous_successful_run(connection, scraper_id, run_id)
    if previous is None:
        return counts
    counts["compared_run_id"] = previous
    rows = await connection.execute(
        _DIFF, {"run_id": run_id, "previous_id": previous, "key": item_key}
    )
    for kind, count in rows:
        counts[str(kind)] = int(count)
    return counts


async def first_changes(connection: AsyncConnection, run_id: int, limit: int) -> list[Any]:
    """The run's first `limit` changes in key order, for the event."""
    rows = await connection.execute(
        text(
            "SELECT kind, key, item, fields FROM run_changes WHERE run_id = :run_id"
            " ORDER BY id LIMIT :limit"
        ),
        {"run_id": run_id, "limit": limit},
    )
    return list(rows)


class ChangeRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def page(
        self, run_id: int, *, kind: ChangeKind | None, after: int | None, limit: int
    ) -> Sequence[RunChange]:
        """Keyset by id (key order within the run)."""
        statement = select(RunChange).where(RunChange.run_id == run_id)
        if kind is not None:
            statement = statement.where(RunChange.kind == kind)
        if after is not None:
            statement = statement.where(col(RunChange.id) > after)
        return (await self.session.exec(statement.order_by(col(RunChange.id)).limit(limit))).all()
