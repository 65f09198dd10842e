"""Cron firings: each due scraper fires exactly once per due time, whichever replica gets it.

Due scrapers are locked with FOR UPDATE SKIP LOCKED and moved to their next due time in the
same transaction, so two replicas never fire the same time. A firing while the scraper still
runs is recorded as a `skipped` run, never lost silently. After downtime, the missed firings
collapse into one catch-up run, and the schedule resumes from now.

Each due scraper on its own: one whose schedule cannot be evaluated (a cron expression or a
timezone stored before they were checked, say) gets a `failed` run saying why and is taken
off the schedule (`next_fire_at` null, so it is not tried again every tick; saving its
schedule again puts it back), with an error line naming it; the others fire as usual.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import UTC, datetime

import structlog
from servicekit.loops import describe
from servicekit.runtime import ServiceRuntime
from servicekit.worker import WorkerLoop
from sqlalchemy import text
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from scraper_manager.crawler.queue import enqueue_run
from scraper_manager.models import ACTIVE_RUN_STATUSES, Run, RunStatus, RunTrigger, Scraper
from scraper_manager.scrapers.service import next_fire
from scraper_manager.settings import Settings

logger = structlog.get_logger(__name__)
LOOP = "scheduler"


async def fire_due(
    session_factory: async_sessionmaker[AsyncSession], now: datetime | None = None
) -> list[Run]:
    """Fire every scraper due at `now`; the runs created (pending, skipped, or failed: the
    scraper's schedule could not be evaluated)."""
    moment = now or datetime.now(UTC)
    created: list[Run] = []
    async with session_factory() as session, session.begin():
        due = (
            await session.exec(
                select(Scraper)
                .where(col(Scraper.next_fire_at).is_not(None), col(Scraper.next_fire_at) <= moment)
                .order_by(col(Scraper.next_fire_at))
                .limit(100)
                .with_for_update(skip_locked=True)
            )
        ).all()
        for scraper in due:
            active = (
                await session.exec(
                    select(Run).where(
                        Run.scraper_id == scraper.id, col(Run.status).in_(ACTIVE_RUN_STATUSES)
                    )
                )
            ).first()
            run = Run(scraper_id=scraper.id, owner=scraper.owner, trigger=RunTrigger.SCHEDULE)
            try:
                following = next_fire(scraper.schedule, scraper.timezone, moment)
            except Exception as exc:
                error = describe(exc, 400)
                logger.error(
                    "schedule cannot be evaluated; scraper taken off the schedule",
                    loop=LOOP,
                    scraper_id=scraper.id,
                    schedule=scraper.schedule,
                    timezone=scraper.timezone,
                    error=error,
                )
                run.status = RunStatus.FAILED
                run.finished_at = moment
                run.last_error = f"the schedule cannot be evaluated: {error}"
                following = None
            else:
                if active is not None:
                    run.status = RunStatus.SKIPPED
                    run.finished_at = moment
                    run.last_error = (
                        f"schedule fired while run {active.id} was still {active.status}"
                    )
            session.add(run)
            scraper.next_fire_at = following
            session.add(scraper)
            created.append(run)
        if created:
            await session.flush()
            connection = await session.connection()
            await connection.execute(text("NOTIFY scraper_runs"))
    return created


def scheduler_loop(settings: Settings) -> WorkerLoop:
    async def run(runtime: ServiceRuntime, stop: asyncio.Event) -> None:
        runtime.progress.beat(LOOP, settings.scheduler_tick_seconds)
        while not stop.is_set():
            try:
                for run in await fire_due(runtime.session_factory):
                    if run.status == RunStatus.PENDING:
                        # Never raises: a run not enqueued is enqueued by the sweeper.
                        await enqueue_run(runtime, run.id)
                runtime.progress.beat(LOOP, settings.scheduler_tick_seconds)
            except Exception as exc:
                logger.warning("scheduler tick failed", error=repr(exc))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), settings.scheduler_tick_seconds)

    return run
