"""Queries on runs and their items."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

import sqlalchemy as sa
from servicekit.db.like import like_escaped
from sqlalchemy import text
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from scraper_manager.models import Item, Run, RunStatus


class RunRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def page(
        self, scraper_id: int, *, limit: int, before_id: int | None, status: RunStatus | None
    ) -> Sequence[Run]:
        statement = select(Run).where(Run.scraper_id == scraper_id)
        if before_id is not None:
            statement = statement.where(col(Run.id) < before_id)
        if status is not None:
            statement = statement.where(Run.status == status)
        return (await self.session.exec(statement.order_by(col(Run.id).desc()).limit(limit))).all()

    async def get(self, scraper_id: int, run_id: int) -> Run | None:
        statement = select(Run).where(Run.id == run_id, Run.scraper_id == scraper_id)
        return (await self.session.exec(statement)).first()

    async def latest_with_items(self, scraper_id: int) -> Run | None:
        statement = (
            select(Run)
            .where(Run.scraper_id == scraper_id, col(Run.status) != RunStatus.SKIPPED)
            .order_by(col(Run.id).desc())
            .limit(1)
        )
        return (await self.session.exec(statement)).first()

    async def items(
        self,
        run_id: int,
        *,
        cursor: int | None,
        limit: int,
        newest_first: bool = False,
        search: str | None = None,
    ) -> Sequence[Item]:
        """Keyset by id, which is crawl order: a page never shifts while the crawl appends.
        `search`: a part of the URL or of any value (the data's JSON text), any case."""
        statement = select(Item).where(Item.run_id == run_id)
        if search:
            pattern = "%" + like_escaped(search) + "%"
            statement = statement.where(
                col(Item.url).ilike(pattern, escape="\\")
                | sa.cast(col(Item.data), sa.Text).ilike(pattern, escape="\\")
            )
        if newest_first:
            if cursor is not None:
                statement = statement.where(col(Item.id) < cursor)
            statement = statement.order_by(col(Item.id).desc())
        else:
            if cursor is not None:
                statement = statement.where(col(Item.id) > cursor)
            statement = statement.order_by(col(Item.id))
        return (await self.session.exec(statement.limit(limit))).all()

    async def item(self, run_id: int, item_id: int) -> Item | None:
        statement = select(Item).where(Item.run_id == run_id, Item.id == item_id)
        return (await self.session.exec(statement)).first()

    async def item_keys(self, run_id: int) -> list[str]:
        """The keys of the run's items, in the order they first appear (item by item, in crawl
        order; within an item, in the order its stored object holds them)."""
        rows = await self.session.exec(  # type: ignore[call-overload]
            text(
                """
                SELECT k.key FROM items AS i,
                     LATERAL jsonb_object_keys(i.data) WITH ORDINALITY AS k(key, n)
                WHERE i.run_id = :run_id
                GROUP BY k.key
                ORDER BY min(ARRAY[i.id, k.n])
                """
            ),
            params={"run_id": run_id},
        )
        return [str(row[0]) for row in rows]

    async def stream_items(self, run_id: int, batch: int = 1000) -> AsyncIterator[Item]:
        after: int | None = None
        while True:
            rows = await self.items(run_id, cursor=after, limit=batch)
            for row in rows:
                yield row
            if len(rows) < batch:
                return
            after = rows[-1].id
