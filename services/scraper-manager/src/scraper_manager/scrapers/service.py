"""The rules of scrapers: per-client capacity, configured proxy pools, schedules, one run at a
time, and stops that reach whichever worker runs the crawl."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

from croniter import croniter
from servicekit.net import AddressPolicy, AddressRefused, check_url
from servicekit.paging import Page, decode_id_cursor, page_of
from sqlmodel.ext.asyncio.session import AsyncSession

from scraper_manager.errors import (
    AddressNotAllowed,
    AlreadyRunning,
    NotRunning,
    ScraperLimitReached,
    ScraperNotFound,
    UnknownItemKey,
    UnknownProxyPool,
)
from scraper_manager.models import Run, RunStatus, RunTrigger, Scraper, ScraperStatus
from scraper_manager.scrapers.repository import ScraperRepository
from scraper_manager.scrapers.schemas import (
    ScraperConfig,
    ScraperOut,
    ScraperPatch,
    StatusView,
    item_key_refusal,
)
from scraper_manager.settings import Settings


def next_fire(schedule: str | None, timezone: str, after: datetime) -> datetime | None:
    """The next due time of a cron expression in the scraper's timezone, in UTC."""
    if schedule is None:
        return None
    local = after.astimezone(ZoneInfo(timezone))
    due: datetime = croniter(schedule, local).get_next(datetime)
    return due.astimezone(UTC)


def render(scraper: Scraper, latest: Run | None) -> ScraperOut:
    return ScraperOut.model_validate(
        {
            **scraper.model_dump(),
            "status": ScraperStatus.IDLE if latest is None else latest.status,
            "next_run_at": scraper.next_fire_at,
        }
    )


class ScraperService:
    def __init__(self, session: AsyncSession, settings: Settings) -> None:
        self.session = session
        self.settings = settings
        self.scrapers = ScraperRepository(session)

    async def _check_address(self, url: str) -> None:
        """The start URL under the shared address policy: an address host in any spelling,
        or a name resolving to a refused address, is 422 (every request of a crawl is checked
        again where it connects)."""
        try:
            await check_url(url, AddressPolicy.allowing(self.settings.allowed_networks))
        except AddressRefused as exc:
            raise AddressNotAllowed(f"url is not allowed: {exc}") from None

    def _check_pool(self, pool: str | None) -> None:
        if pool is not None and pool not in self.settings.proxy_pools:
            known = ", ".join(sorted(self.settings.proxy_pools)) or "none are configured"
            raise UnknownProxyPool(f"Unknown proxy_pool '{pool}' ({known})")

    def _check_item_key(self, item_key: str | None, selectors: dict[str, str]) -> None:
        refusal = item_key_refusal(item_key, selectors)
        if refusal is not None:
            raise UnknownItemKey(refusal)

    async def get(self, owner: str, scraper_id: int, *, lock: bool = False) -> Scraper:
        scraper = await self.scrapers.get_owned(scraper_id, owner, lock=lock)
        if scraper is None:
            raise ScraperNotFound(f"Scraper {scraper_id} not found")
        return scraper

    async def create(self, owner: str, config: ScraperConfig) -> Scraper:
        self._check_pool(config.proxy_pool)
        self._check_item_key(config.item_key, config.selectors)
        await self._check_address(config.url)
        if await self.scrapers.count_for(owner) >= self.settings.max_scrapers_per_client:
            raise ScraperLimitReached(
                f"A client may have at most {self.settings.max_scrapers_per_client} scrapers"
            )
        now = datetime.now(UTC)
        scraper = Scraper(
            owner=owner,
            **config.model_dump(),
            next_fire_at=next_fire(config.schedule, config.timezone, now),
        )
        self.session.add(scraper)
        await self.session.flush()
        return scraper

    async def update(self, owner: str, scraper_id: int, patch: ScraperPatch) -> Scraper:
        scraper = await self.get(owner, scraper_id, lock=True)
        changes: dict[str, Any] = patch.model_dump(exclude_unset=True)
        if "proxy_pool" in changes:
            self._check_pool(changes["proxy_pool"])
        if changes.get("url") is not None:
            await self._check_address(changes["url"])
        nullable = {
            "schedule",
            "proxy_pool",
            "max_depth",
            "follow",
            "item_selector",
            "keep_runs",
            "item_key",
        }
        for field, value in changes.items():
            if value is not None or field in nullable:
                setattr(scraper, field, value)
        # Judged on the result: new selectors may drop the key's field, or bring it.
        self._check_item_key(scraper.item_key, scraper.selectors)
        # Re-register with the scheduler: the next due time follows the new expression.
        scraper.next_fire_at = next_fire(scraper.schedule, scraper.timezone, datetime.now(UTC))
        scraper.updated_at = datetime.now(UTC)
        self.session.add(scraper)
        await self.session.flush()
        return scraper

    async def delete(self, owner: str, scraper_id: int) -> None:
        scraper = await self.get(owner, scraper_id, lock=True)
        await self._stop_active(scraper)
        await self.session.delete(scraper)
        await self.session.flush()

    async def start_run(
        self, owner: str, scraper_id: int, trigger: RunTrigger = RunTrigger.MANUAL
    ) -> Run:
        scraper = await self.get(owner, scraper_id, lock=True)
        if await self.scrapers.active_run(scraper.id) is not None:
            raise AlreadyRunning(f"Scraper {scraper_id} is already running")
        run = Run(scraper_id=scraper.id, owner=owner, status=RunStatus.PENDING, trigger=trigger)
        self.session.add(run)
        await self.session.flush()
        await self.scrapers.notify_runs()
        return run

    async def stop(self, owner: str, scraper_id: int) -> Run:
        """Stop the active run: a pending one at once, a running one by its worker (the
        caller signals it when the run is `running`)."""
        run = await self._stop_active(await self.get(owner, scraper_id))
        if run is None:
            raise NotRunning(f"Scraper {scraper_id} is not running")
        return run

    async def _stop_active(self, scraper: Scraper) -> Run | None:
        run = await self.scrapers.active_run(scraper.id)
        if run is None:
            return None
        if run.status == RunStatus.PENDING:
            # Never started: stopped before it starts.
            run.status = RunStatus.STOPPED
            run.finished_at = datetime.now(UTC)
            run.last_error = "stopped before it started"
        else:
            run.stop_requested = True
        self.session.add(run)
        await self.session.flush()
        await self.scrapers.notify_runs()
        return run

    async def status(self, owner: str, scraper_id: int) -> StatusView:
        scraper = await self.get(owner, scraper_id)
        latest = (await self.scrapers.latest_runs([scraper.id])).get(scraper.id)
        if latest is None:
            return StatusView(
                id=scraper.id, status=ScraperStatus.IDLE, last_run=None, items_count=0
            )
        return StatusView(
            id=scraper.id,
            status=ScraperStatus(latest.status),
            last_run=latest.started_at or latest.created_at,
            items_count=latest.items_collected,
        )

    async def page(
        self,
        owner: str,
        *,
        limit: int,
        cursor: str | None,
        status: ScraperStatus | None,
        search: str | None = None,
    ) -> Page[ScraperOut]:
        """Newest first; `cursor` is the last id of the previous page; `search`: a part of
        the name or start URL, any case."""
        rows = await self.scrapers.page(
            owner,
            limit=limit + 1,
            before_id=decode_id_cursor(cursor),
            status=status,
            search=search,
        )
        page = page_of(rows, limit, lambda scraper: str(scraper.id))
        return Page(await self.render_many(page.items), page.next_cursor)

    async def render_many(self, scrapers: Sequence[Scraper]) -> list[ScraperOut]:
        latest = await self.scrapers.latest_runs([s.id for s in scrapers])
        return [render(s, latest.get(s.id)) for s in scrapers]

    async def render(self, scraper: Scraper) -> ScraperOut:
        return (await self.render_many([scraper]))[0]
