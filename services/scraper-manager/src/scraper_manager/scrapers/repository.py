"""Queries on scrapers and their latest runs."""

from __future__ import annotations

from collections.abc import Sequence

from servicekit.db.like import like_escaped
from sqlalchemy import func, text
from sqlalchemy.dialects.postgresql import distinct_on
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from scraper_manager.models import ACTIVE_RUN_STATUSES, Run, RunStatus, Scraper, ScraperStatus


class ScraperRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def count_for(self, owner: str) -> int:
        statement = select(func.count()).select_from(Scraper).where(Scraper.owner == owner)
        return int((await self.session.exec(statement)).one())

    async def get_owned(self, scraper_id: int, owner: str, *, lock: bool = False) -> Scraper | None:
        statement = select(Scraper).where(Scraper.id == scraper_id, Scraper.owner == owner)
        if lock:
            statement = statement.with_for_update()
        return (await self.session.exec(statement)).first()

    async def page(
        self,
        owner: str,
        *,
        limit: int,
        before_id: int | None,
        status: ScraperStatus | None,
        search: str | None = None,
    ) -> Sequence[Scraper]:
        statement = select(Scraper).where(Scraper.owner == owner)
        if search:
            # A substring of the name or the start URL, its % and _ taken as themselves.
            pattern = "%" + like_escaped(search) + "%"
            statement = statement.where(
                col(Scraper.name).ilike(pattern, escape="\\")
                | col(Scraper.url).ilike(pattern, escape="\\")
            )
        if before_id is not None:
            statement = statement.where(col(Scraper.id) < before_id)
        if status is not None:
            latest = (
                select(Run.status)
                .where(Run.scraper_id == Scraper.id, Run.status != RunStatus.SKIPPED)
                .order_by(col(Run.id).desc())
                .limit(1)
                .scalar_subquery()
            )
            statement = statement.where(func.coalesce(latest, ScraperStatus.IDLE.value) == status)
        statement = statement.order_by(col(Scraper.id).desc()).limit(limit)
        return (await self.session.exec(statement)).all()

    async def latest_runs(self, scraper_ids: Sequence[int]) -> dict[int, Run]:
        if not scraper_ids:
            return {}
        statement = (
            select(Run)
            # A skipped firing is history, not the scraper's state.
            .where(col(Run.scraper_id).in_(scraper_ids), Run.status != RunStatus.SKIPPED)
            .ext(distinct_on(col(Run.scraper_id)))
            .order_by(col(Run.scraper_id), col(Run.id).desc())
        )
        return {run.scraper_id: run for run in (await self.session.exec(statement)).all()}

    async def recent_items(self, scraper_ids: Sequence[int], runs: int) -> dict[int, list[int]]:
        """Items of each scraper's last `runs` runs, oldest first: one query for a page of
        scrapers (the runs ranked per scraper), not one per scraper."""
        if not scraper_ids:
            return {}
        ranked = (
            select(
                col(Run.scraper_id).label("scraper_id"),
                col(Run.id).label("run_id"),
                col(Run.items_collected).label("items"),
                func.row_number()
                .over(partition_by=col(Run.scraper_id), order_by=col(Run.id).desc())
                .label("rank"),
            )
            .where(col(Run.scraper_id).in_(scraper_ids), Run.status != RunStatus.SKIPPED)
            .subquery()
        )
        statement = (
            select(ranked.c.scraper_id, ranked.c["items"])
            .where(ranked.c.rank <= runs)
            .order_by(ranked.c.scraper_id, ranked.c.run_id)
        )
        found: dict[int, list[int]] = {}
        for scraper_id, items in (await self.session.exec(statement)).all():
            found.setdefault(int(scraper_id), []).append(int(items))
        return found

    async def active_run(self, scraper_id: int) -> Run | None:
        statement = (
            select(Run)
            .where(Run.scraper_id == scraper_id, col(Run.status).in_(ACTIVE_RUN_STATUSES))
            .order_by(col(Run.id).desc())
            .with_for_update()
        )
        return (await self.session.exec(statement)).first()

    async def notify_runs(self) -> None:
        connection = await self.session.connection()
        await connection.execute(text("NOTIFY scraper_runs"))
