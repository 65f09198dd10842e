"""The worker's side of runs: claim pending runs (any worker may), keep a heartbeat lease,
crawl, write items in batches, finish with a status and an event. A run whose worker died
is failed with a reason by whichever worker notices its lease ran out."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import aiohttp
import structlog
from opentelemetry.context import Context
from opentelemetry.instrumentation.utils import suppress_http_instrumentation
from opentelemetry.trace import Status, StatusCode
from prometheus_client import Counter, Histogram
from servicekit.db.notify import NotifyListener
from servicekit.events import record_event
from servicekit.events.envelope import new_event_id
from servicekit.events.outbox import NewEvent, record_events
from servicekit.live import LiveAnnouncer
from servicekit.loops import describe, is_outage
from servicekit.net import (
    AddressPolicy,
    ProxyTarget,
    guarded_connector,
    proxy_target,
    refused_header,
)
from servicekit.runtime import ServiceRuntime
from servicekit.tracing import tracer
from servicekit.worker import WorkerLoop
from sqlalchemy import text

from scraper_manager.crawler.browser import BrowserPool, PageRenderer, pace_and_route
from scraper_manager.crawler.egress import EgressProxy
from scraper_manager.crawler.engine import (
    STOP_GRACE_SECONDS,
    CachedItems,
    Collected,
    Crawl,
    CrawlConfig,
)
from scraper_manager.crawler.host_budget import PgHostBudget
from scraper_manager.crawler.queue import enqueue_run, pull_subscription, run_id_of
from scraper_manager.crawler.revalidation import StoredPages, extraction_fingerprint
from scraper_manager.crawler.runlog import RunLog, without_credentials
from scraper_manager.crawler.signals import listen_for_stops
from scraper_manager.crawler.text import clean_text, clean_value
from scraper_manager.events import (
    EVENT_CHANGES,
    ITEMS_COLLECTED,
    RUN_COMPLETED,
    RUN_FAILED,
    RUN_ITEMS_CHANGED,
    RUN_STARTED,
    RUN_STOPPED,
    ChangeCounts,
    ItemChange,
    ItemsChanged,
    ItemsCollected,
    RunEvent,
)
from scraper_manager.models import Run, RunStatus, Scraper
from scraper_manager.runlog.repository import insert_lines
from scraper_manager.runlog.service import prune_run_logs
from scraper_manager.runs.changes import detect_changes, first_changes
from scraper_manager.runs.live import LIVE_SUBJECT
from scraper_manager.settings import Settings

logger = structlog.get_logger(__name__)
RUN_QUEUE_LOOP = "run-queue"
PRUNE_LOOP = "run-log-prune"
# On the worker's /metrics (WORKER_PROBE_PORT): what this process has crawled.
RUNS_FINISHED = Counter("scraper_runs_finished", "Runs this worker finished", ["status"])
PAGES_FETCHED = Counter("scraper_pages_fetched", "Pages this worker fetched")
RUN_DURATION = Histogram(
    "scraper_run_duration_seconds",
    "Runs this worker finished, by how long they ran (start to finish) and how they ended",
    ["status"],
    # A crawl lasts seconds to hours.
    buckets=(1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600),
)
# NOTIFYed when a run is created, so an idle worker fetches it at once.
RUNS_CHANNEL = "scraper_runs"

_CLAIM = text(
    """
    UPDATE runs SET status = :running, started_at = now(), heartbeat_at = now(),
                    worker_id = :worker
    WHERE id = :run_id AND status = :pending
    RETURNING id
    """
)
_WAITING = text(
    """
    SELECT id FROM runs
    WHERE status = :pending AND created_at < now() - make_interval(secs => :after)
    ORDER BY id LIMIT 100
    """
)
# Every run the worker crawls beats in one statement (and one transaction) a beat, not one
# each: 500 runs are 3 statements a second, not 1,000 transactions (README, "Scale").
_HEARTBEATS = text(
    """
    UPDATE runs AS r SET heartbeat_at = now(), pages_fetched = b.pages,
        requests_failed = b.failed, retries = b.retries, bytes_received = b.bytes,
        status_counts = b.counts, last_error = b.error
    FROM unnest(CAST(:ids AS int[]), CAST(:pages AS int[]), CAST(:failed AS int[]),
                CAST(:retries AS int[]), CAST(:bytes AS bigint[]), CAST(:counts AS jsonb[]),
                CAST(:errors AS text[])) AS b(id, pages, failed, retries, bytes, counts, error)
    WHERE r.id = b.id
    RETURNING r.id, r.stop_requested
    """
)
# Items of one or many runs, in crawl order within each run, and each run's count, in one
# statement. A row is an item as extracted (`url`, `data`), or a page answered 304 (`cached`:
# its page cache key): the page's row is marked seen, and its stored items are copied here
# from it (when it is of the run's extraction fingerprint), in their stored order, under the
# URL stored with them: a reused item is never decoded, re-encoded and sent back by the
# worker. Each run is a range of the rows (`first` to `last`), so rows carry no run ids.
# The cache keys are one text, a line each ('' for an item): a canonical URL has no raw
# newline, and one string costs the driver nothing where an array costs it per element.
_WRITE_ITEMS = text(
    """
    WITH batch AS (
        SELECT r.run_id, r.scraper_id, r.fingerprint, b.url, b.data,
               NULLIF(b.cached, '') AS cached, b.n
        FROM unnest(CAST(:urls AS text[]), CAST(:data AS jsonb[]),
                    string_to_array(CAST(:cached AS text), E'\n'))
             WITH ORDINALITY AS b(url, data, cached, n)
        JOIN unnest(CAST(:runs AS int[]), CAST(:scrapers AS int[]),
                    CAST(:fingerprints AS text[]), CAST(:firsts AS int[]),
                    CAST(:lasts AS int[])) AS r(run_id, scraper_id, fingerprint, first, last)
            ON b.n BETWEEN r.first AND r.last
    ), seen AS (
        -- Still there: kept from pruning (`StoredPages.load`), first when the next run loads.
        UPDATE page_cache AS c SET seen_at = now()
        FROM batch AS b
        WHERE b.cached IS NOT NULL AND c.scraper_id = b.scraper_id AND c.url = b.cached
    ), inserted AS (
        INSERT INTO items (run_id, scraper_id, url, data, created_at)
        SELECT b.run_id, b.scraper_id, coalesce(b.url, c.page_url), coalesce(b.data, e.item),
               now()
        FROM batch AS b
        LEFT JOIN page_cache AS c
            ON b.cached IS NOT NULL AND c.scraper_id = b.scraper_id AND c.url = b.cached
            AND c.fingerprint = b.fingerprint
        LEFT JOIN LATERAL jsonb_array_elements(c.items) WITH ORDINALITY AS e(item, m) ON true
        WHERE b.cached IS NULL OR e.item IS NOT NULL
        ORDER BY b.n, e.m
        RETURNING run_id
    ), counted AS (SELECT run_id, count(*) AS n FROM inserted GROUP BY run_id)
    UPDATE runs AS r SET items_collected = r.items_collected + c.n
    FROM counted AS c
    WHERE r.id = c.run_id
    RETURNING r.id, r.items_collected, c.n
    """
)
_REAP = text(
    """
    UPDATE runs SET status = :failed, finished_at = now(),
        last_error = 'worker lost: no heartbeat for ' || CAST(:lease AS int) || ' s'
    WHERE status = :running AND heartbeat_at < now() - make_interval(secs => :lease)
    RETURNING id
    """
)


async def write_items(
    connection: Any, batches: list[tuple[int, int, list[Collected]]]
) -> dict[int, tuple[int, int]]:
    """The batches of runs (run id, scraper id, what it collected), written with
    `_WRITE_ITEMS`; per run that wrote any: (items written, its total since it started)."""
    runs: list[int] = []
    scrapers: list[int] = []
    fingerprints: list[str | None] = []
    firsts: list[int] = []
    lasts: list[int] = []
    urls: list[str | None] = []
    data: list[str | None] = []
    cached: list[str] = []
    for run_id, scraper_id, batch in batches:
        if not batch:
            continue
        runs.append(run_id)
        scrapers.append(scraper_id)
        firsts.append(len(urls) + 1)
        fingerprint = None
        for entry in batch:
            if isinstance(entry, CachedItems):
                fingerprint = entry.fingerprint  # one per run
                urls.append(None)
                data.append(None)
                cached.append(entry.key)
            else:
                url, item = entry
                urls.append(clean_text(url))
                data.append(json.dumps(clean_value(item), default=str))
                cached.append("")
        fingerprints.append(fingerprint)
        lasts.append(len(urls))
    if not runs:
        return {}
    # A 304 page's row has no url nor data: trailing ones are left out, as `unnest` pads
    # the shorter arrays with NULLs (a crawl of 304s sends two empty arrays, not two arrays
    # of 2,000 NULLs the driver dumps one by one).
    while urls and urls[-1] is None:
        urls.pop()
        data.pop()
    rows = await connection.execute(
        _WRITE_ITEMS,
        {
            "runs": runs,
            "scrapers": scrapers,
            "fingerprints": fingerprints,
            "firsts": firsts,
            "lasts": lasts,
            "urls": urls,
            "data": data,
            "cached": "\n".join(cached),
        },
    )
    return {int(run_id): (int(n), int(total)) for run_id, total, n in rows}


def worker_name() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


def event_of(run: Run) -> RunEvent:
    return RunEvent(
        scraper_id=run.scraper_id,
        run_id=run.id,
        status=run.status,
        items_collected=run.items_collected,
        pages_fetched=run.pages_fetched,
        requests_failed=run.requests_failed,
        started_at=run.started_at,
        finished_at=run.finished_at,
        error=run.last_error,
        not_modified=run.not_modified,
        changes=None if run.changes is None else ChangeCounts.model_validate(run.changes),
    )


@dataclass
class Beating:
    """A run the worker's heartbeat writes for."""

    run_id: int
    scraper_id: int
    owner: str
    crawl: Crawl
    stop: asyncio.Event
    requested: asyncio.Event
    told: bool = False  # "stop requested" logged


class RunExecutor:
    def __init__(
        self,
        runtime: ServiceRuntime,
        settings: Settings,
        http: aiohttp.ClientSession,
        proxy_http: aiohttp.ClientSession | None = None,
        browsers: BrowserPool | None = None,
    ) -> None:
        self.runtime = runtime
        # The worker's Chromium, launched by the first browser run.
        self.browsers = browsers or BrowserPool(
            settings.chromium_path, settings.browser_pages_per_worker
        )
        self.settings = settings
        self.http = http
        self.proxy_http = proxy_http
        self.policy = AddressPolicy.allowing(settings.allowed_networks)
        self.worker = worker_name()
        # Tells the dashboards' live run pages which runs changed (after each commit).
        self.live = LiveAnnouncer(runtime.nats, LIVE_SUBJECT)
        # Stop events of the runs this worker crawls, for the NATS stop signal.
        self.stops: dict[int, tuple[asyncio.Event, asyncio.Event]] = {}
        # Each host's request slots, shared with every run on every worker.
        self.host_budget = PgHostBudget(runtime.engine)
        # One heartbeat for all the runs this worker crawls (started with the first).
        self.beating: dict[int, Beating] = {}
        self._beat_task: asyncio.Task[None] | None = None
        # Held while a beat writes: a run's end waits for the beat that includes it.
        self._beat_lock = asyncio.Lock()

    async def claim(self, wanted: int) -> int | None:
        """Take run `wanted` if it is still pending (another worker, or a stop, may have
        been first)."""
        async with self.runtime.session_factory() as session, session.begin():
            connection = await session.connection()
            run_id = await connection.scalar(
                _CLAIM,
                {
                    "worker": self.worker,
                    "run_id": wanted,
                    "running": RunStatus.RUNNING,
                    "pending": RunStatus.PENDING,
                },
            )
            if run_id is None:
                return None
            run = await session.get(Run, run_id)
            assert run is not None
            await record_event(session, RUN_STARTED, event_of(run), tenant=run.owner)
            return int(run_id)

    async def sweep(self) -> int:
        """Enqueue again the runs that have waited longer than a message should take."""
        async with self.runtime.session_factory() as session:
            connection = await session.connection()
            waiting = (
                (
                    await connection.execute(
                        _WAITING,
                        {
                            "after": self.settings.requeue_after_seconds,
                            "pending": RunStatus.PENDING,
                        },
                    )
                )
                .scalars()
                .all()
            )
        for run_id in waiting:
            await enqueue_run(self.runtime, int(run_id), attempt=int(time.time()) // 60)
        return len(waiting)

    async def reap(self) -> int:
        """Fail the runs whose worker stopped beating."""
        async with self.runtime.session_factory() as session, session.begin():
            connection = await session.connection()
            lost = (
                (
                    await connection.execute(
                        _REAP,
                        {
                            "lease": self.settings.run_lease_seconds,
                            "running": RunStatus.RUNNING,
                            "failed": RunStatus.FAILED,
                        },
                    )
                )
                .scalars()
                .all()
            )
            for run_id in lost:
                run = await session.get(Run, run_id)
                assert run is not None
                await record_event(session, RUN_FAILED, event_of(run), tenant=run.owner)
        await self.live.changed(lost)
        return len(lost)

    async def execute(self, run_id: int) -> None:
        async with self.runtime.session_factory() as session:
            run = await session.get(Run, run_id)
            scraper = await session.get(Scraper, run.scraper_id) if run else None
        if run is None or scraper is None:
            return
        await self.live.changed([run_id])  # claimed: running now
        stop = asyncio.Event()
        requested = asyncio.Event()
        self.stops[run_id] = (stop, requested)
        config = CrawlConfig(
            url=scraper.url,
            # Scrapers stored before headers were checked may hold refused ones: never sent.
            headers={k: v for k, v in scraper.headers.items() if refused_header(k) is None},
            rate_limit=scraper.rate_limit,
            max_pages=scraper.max_pages,
            max_depth=scraper.max_depth,
            follow=scraper.follow,
            selectors=scraper.selectors,
            item_selector=scraper.item_selector,
            obey_robots=scraper.obey_robots,
            concurrency=scraper.concurrency,
            timeout_seconds=scraper.timeout_seconds,
            proxies=tuple(self.settings.proxy_pools.get(scraper.proxy_pool or "", [])),
            max_response_bytes=self.settings.max_response_bytes,
            max_redirects=self.settings.max_redirects,
            max_link_length=self.settings.max_link_length,
            max_links_per_page=self.settings.max_links_per_page,
            host_budget_per_second=self.settings.host_budget_per_second,
        )

        async def store(batch: list[Collected]) -> None:
            async with self.runtime.session_factory() as s, s.begin():
                connection = await s.connection()
                written = await write_items(connection, [(run_id, scraper.id, batch)])
                if run_id not in written:
                    return
                count, total = written[run_id]
                await record_event(
                    s,
                    ITEMS_COLLECTED,
                    ItemsCollected(
                        scraper_id=scraper.id,
                        run_id=run_id,
                        count=count,
                        items_collected=total,
                    ),
                    tenant=scraper.owner,
                )

        pages: StoredPages | None = None
        known = 0
        browser = scraper.render == "browser"
        # A browser page is rendered whole every time: its scripts' requests are not the
        # document's, so a 304 for the document says nothing of what the page would show.
        if scraper.revalidate and not browser:
            pages = StoredPages(
                self.runtime.session_factory,
                scraper.id,
                extraction_fingerprint(config.selectors, config.item_selector, config.follow),
                keep_days=self.settings.result_retention_days,
                limit=config.max_pages,
            )
            known = await pages.load()
        log = RunLog(self.settings.run_log_max_lines)
        log.info(
            "run started",
            url=config.url,
            max_pages=config.max_pages,
            max_depth=config.max_depth,
            rate_limit=config.rate_limit,
            host_budget_per_second=config.host_budget_per_second,
            concurrency=config.concurrency,
            timeout_seconds=config.timeout_seconds,
            obey_robots=config.obey_robots,
            follow=config.follow,
            selectors=sorted(config.selectors),
            item_selector=config.item_selector,
            proxy_pool=scraper.proxy_pool,
            proxies=len(config.proxies),
            # Header names only: their values may be credentials.
            headers=sorted(config.headers),
            worker=self.worker,
            revalidate=scraper.revalidate and not browser,
            render=scraper.render,
            # Pages stored by earlier runs, asked with their validators.
            pages_known=known,
        )

        async def route(url: str) -> ProxyTarget:
            # Through a proxy the proxy connects: the URL is resolved and checked here first.
            return await proxy_target(url, self.policy)

        renderer = self._renderer(config, log) if browser else None
        crawl = Crawl(
            config,
            self.http,
            user_agent=self.settings.user_agent,
            on_items=store,
            stop=stop,
            proxy_http=self.proxy_http,
            proxy_target=route,
            log=log,
            pages=pages,
            render=renderer.render if renderer is not None else None,
            host_budget=self.host_budget,
        )
        if renderer is not None:
            # The page's own requests: paced as pages, out through the run's proxies.
            pace_and_route(renderer.egress, crawl)
        self._beat_for(Beating(run_id, scraper.id, scraper.owner, crawl, stop, requested))
        error: str | None = None
        logger.info("run started", run_id=run_id, scraper_id=scraper.id, url=config.url)
        with tracer.start_as_current_span(
            "crawl run",
            # Its own trace: a run is started by a schedule or a request that ended long ago.
            context=Context(),
            attributes={
                "crawler.run.id": run_id,
                "crawler.scraper.id": scraper.id,
                "url.full": without_credentials(config.url),
                "crawler.max_pages": config.max_pages,
            },
        ) as span:
            try:
                # No client span per page from the aiohttp instrumentation, and no traceparent
                # sent to the sites crawled: the engine samples its own fetch spans.
                with suppress_http_instrumentation():
                    if renderer is not None:
                        await renderer.open()
                    await crawl.run()
            except Exception as exc:
                error = f"{type(exc).__name__}: {exc}"[:500]
                logger.exception("run crashed", run_id=run_id)
                span.record_exception(exc)
            finally:
                # Out of the beat, then past a beat under way (never cancelled: a beat cut off
                # mid-write would leave its connection dangling).
                self.beating.pop(run_id, None)
                async with self._beat_lock:
                    pass
                self.stops.pop(run_id, None)
                if renderer is not None:
                    await renderer.close()
                    # Summarised, not one line per request.
                    log.info("browser pages", **renderer.stats())
            if requested.is_set():
                log.info("stop honoured", in_flight_grace_seconds=STOP_GRACE_SECONDS)
            if error is not None:
                log.error("run crashed", error=error)
            if pages is not None:
                await pages.flush()
            status = await self._finish(run_id, scraper, crawl, requested.is_set(), error)
            stats = crawl.stats
            span.set_attributes(
                {
                    "crawler.run.status": status.value,
                    "crawler.pages_fetched": stats.pages_fetched,
                    "crawler.items_collected": stats.items_collected,
                    "crawler.requests_failed": stats.requests_failed,
                    "crawler.retries": stats.retries,
                }
            )
            if status is RunStatus.FAILED:
                span.set_status(Status(StatusCode.ERROR, error or "the run failed"))

    def _renderer(self, config: CrawlConfig, log: RunLog) -> PageRenderer:
        def refused(url: str, reason: str) -> None:
            log.warning("browser request refused by the address policy", url=url, reason=reason)

        egress = EgressProxy(
            self.policy,
            allow_internal_proxies=self.settings.allow_internal_proxies,
            on_refused=refused,
            timeout_seconds=config.timeout_seconds,
            max_response_bytes=config.max_response_bytes,
        )
        return PageRenderer(
            self.browsers,
            egress,
            user_agent=self.settings.user_agent,
            timeout_seconds=config.timeout_seconds,
            blocked=self.settings.browser_blocked_resources,
            max_bytes=config.max_response_bytes,
        )

    def _beat_for(self, run: Beating) -> None:
        self.beating[run.run_id] = run
        if self._beat_task is None or self._beat_task.done():
            self._beat_task = asyncio.create_task(self._beat_loop())

    async def _beat_loop(self) -> None:
        """Every `heartbeat_seconds` while runs are crawled; ends when none is left."""
        while self.beating:
            await asyncio.sleep(self.settings.heartbeat_seconds)
            runs = list(self.beating.values())
            if not runs:
                return
            try:
                async with self._beat_lock:
                    await self._beat(runs)
            except Exception as exc:
                # The lease (RUN_LEASE_SECONDS) outlasts a few missed beats; the next one
                # writes everything since.
                logger.warning("heartbeat failed", runs=len(runs), error=describe(exc))

    async def _beat(self, runs: list[Beating]) -> None:
        """The beat of every run at once: their log lines since the last beat, counters and
        lease in one statement, the items collected since in one more (and their
        `items.collected` events in one), all in one transaction; then the stop flags."""
        for run in runs:
            if run.requested.is_set() and not run.told:
                # The NATS signal came between beats.
                run.crawl.log.info("stop requested")
                run.told = True
        # Each run's hand-over is held while the beat writes its items, so a batch of 100
        # (or the crawl's last) is never stored ahead of older items; a run handing over a
        # batch right now keeps its newer items for the next beat.
        taken: list[tuple[Beating, list[Collected]]] = []
        for run in runs:
            if not run.crawl.sink_lock.locked():
                await run.crawl.sink_lock.acquire()  # free: taken without waiting
                taken.append((run, run.crawl.take_items()))
        try:
            async with self.runtime.session_factory() as session, session.begin():
                connection = await session.connection()
                for run in runs:
                    await insert_lines(connection, run.run_id, run.crawl.log.take())
                stops = await self._write_beats(connection, runs)
                await self._write_items(session, [(r, i) for r, i in taken if i])
        except BaseException:
            for run, items in taken:
                run.crawl.give_back(items)
            raise
        finally:
            for run, _ in taken:
                run.crawl.sink_lock.release()
        for run in runs:
            if run.crawl.pages is not None:
                await run.crawl.pages.flush()
        await self.live.changed([run.run_id for run in runs])
        for run in runs:
            if stops.get(run.run_id) and not run.requested.is_set():
                run.crawl.log.info("stop requested")
                run.told = True
                run.requested.set()
                run.stop.set()

    async def _write_beats(self, connection: Any, runs: list[Beating]) -> dict[int, bool]:
        stats = [run.crawl.stats for run in runs]
        rows = await connection.execute(
            _HEARTBEATS,
            {
                "ids": [run.run_id for run in runs],
                "pages": [s.pages_fetched for s in stats],
                "failed": [s.requests_failed for s in stats],
                "retries": [s.retries for s in stats],
                "bytes": [s.bytes for s in stats],
                "counts": [json.dumps(dict(s.status_counts)) for s in stats],
                "errors": [clean_text(s.last_error) if s.last_error else None for s in stats],
            },
        )
        return {int(run_id): bool(flag) for run_id, flag in rows}

    async def _write_items(
        self, session: Any, taken: list[tuple[Beating, list[Collected]]]
    ) -> None:
        """The items collected since the last beat, however few (a run's stored items grow
        while it runs, not only by the hundred), with an `items.collected` event per run."""
        if not taken:
            return
        written = await write_items(
            await session.connection(),
            [(run.run_id, run.scraper_id, items) for run, items in taken],
        )
        await record_events(
            session,
            [
                NewEvent(
                    id=new_event_id(),
                    type=ITEMS_COLLECTED,
                    tenant=run.owner,
                    data=ItemsCollected(
                        scraper_id=run.scraper_id,
                        run_id=run.run_id,
                        count=written[run.run_id][0],
                        items_collected=written[run.run_id][1],
                    ).model_dump(mode="json"),
                )
                for run, _ in taken
                if run.run_id in written
            ],
        )

    async def _finish(
        self, run_id: int, scraper: Scraper, crawl: Crawl, stopped: bool, error: str | None
    ) -> RunStatus:
        stats = crawl.stats
        if stopped:
            status = RunStatus.STOPPED
        elif error is not None or (stats.pages_fetched == 0 and stats.requests_failed > 0):
            status = RunStatus.FAILED
        else:
            status = RunStatus.COMPLETED
        log = crawl.log
        if crawl.bucket.waits:
            # Summarised, not one line per request.
            log.info(
                "rate limit waits",
                waits=crawl.bucket.waits,
                seconds=round(crawl.bucket.waited_seconds, 3),
                interval_seconds=round(crawl.bucket.interval, 3),
            )
        if crawl.host_waits:
            # Waits for the host's budget shared with other runs: summarised likewise.
            log.info(
                "host budget waits",
                waits=crawl.host_waits,
                seconds=round(crawl.host_waited_seconds, 3),
            )
        if stats.not_modified:
            # Summarised, not one line per page.
            log.info(
                "pages not modified, stored items and links reused",
                pages=stats.not_modified,
                items=stats.items_reused,
            )
        (log.info if status == RunStatus.COMPLETED else log.warning)(
            "run ended",
            status=status.value,
            pages_fetched=stats.pages_fetched,
            items_collected=stats.items_collected,
            requests_failed=stats.requests_failed,
            retries=stats.retries,
            bytes=stats.bytes,
            status_counts=dict(stats.status_counts),
            not_modified=stats.not_modified,
        )
        log.close()
        async with self.runtime.session_factory() as session, session.begin():
            run = await session.get(Run, run_id, with_for_update=True)
            if run is None or run.status != RunStatus.RUNNING:
                return status  # deleted, or reaped meanwhile
            await insert_lines(await session.connection(), run_id, log.take())
            run.status = status
            run.finished_at = datetime.now(UTC)
            started = run.started_at or run.finished_at
            ran = max((run.finished_at - started).total_seconds(), 0.0)
            run.pages_fetched = stats.pages_fetched
            run.requests_failed = stats.requests_failed
            run.retries = stats.retries
            run.bytes_received = stats.bytes
            run.status_counts = dict(stats.status_counts)
            run.not_modified = stats.not_modified
            last_error = error or stats.last_error
            run.last_error = clean_text(last_error) if last_error else None
            changed: ItemsChanged | None = None
            if status is RunStatus.COMPLETED and scraper.item_key is not None:
                # In the run's finishing transaction: a completed run always has its changes.
                connection = await session.connection()
                run.changes = await detect_changes(
                    connection, scraper_id=scraper.id, run_id=run_id, item_key=scraper.item_key
                )
                changed = await self._items_changed(connection, run_id, scraper.id, run.changes)
            session.add(run)
            await session.flush()
            kind = {
                RunStatus.COMPLETED: RUN_COMPLETED,
                RunStatus.FAILED: RUN_FAILED,
                RunStatus.STOPPED: RUN_STOPPED,
            }[status]
            await record_event(session, kind, event_of(run), tenant=run.owner)
            if changed is not None:
                await record_event(session, RUN_ITEMS_CHANGED, changed, tenant=run.owner)
        await self.live.changed([run_id])
        RUNS_FINISHED.labels(status).inc()
        PAGES_FETCHED.inc(stats.pages_fetched)
        RUN_DURATION.labels(status.value).observe(ran)
        (logger.info if status == RunStatus.COMPLETED else logger.warning)(
            "run finished",
            run_id=run_id,
            status=status.value,
            pages_fetched=stats.pages_fetched,
            items_collected=stats.items_collected,
            requests_failed=stats.requests_failed,
            last_error=error or stats.last_error,
        )
        return status

    async def _items_changed(
        self, connection: Any, run_id: int, scraper_id: int, counts: dict[str, Any]
    ) -> ItemsChanged | None:
        """The `run.items_changed` event of a compared run with changes (none otherwise: an
        unchanged site or a first run says nothing)."""
        total = counts["added"] + counts["removed"] + counts["changed"]
        if counts["compared_run_id"] is None or total == 0:
            return None
        first = await first_changes(connection, run_id, EVENT_CHANGES)
        return ItemsChanged(
            scraper_id=scraper_id,
            run_id=run_id,
            compared_run_id=counts["compared_run_id"],
            added=counts["added"],
            removed=counts["removed"],
            changed=counts["changed"],
            changes=[
                ItemChange(kind=kind, key=key, item=item, fields=fields)
                for kind, key, item, fields in first
            ],
            more=total > len(first),
        )


def log_prune_loop(settings: Settings) -> WorkerLoop:
    """Retention of run logs: lines older than `run_log_retention_days` are deleted."""

    async def run(runtime: ServiceRuntime, stop: asyncio.Event) -> None:
        runtime.progress.beat(PRUNE_LOOP, settings.run_log_prune_seconds)
        while not stop.is_set():
            try:
                pruned = await prune_run_logs(
                    runtime.session_factory,
                    now=datetime.now(UTC),
                    retention_days=settings.run_log_retention_days,
                )
                if pruned:
                    logger.info("run log lines pruned", lines=pruned)
                runtime.progress.beat(PRUNE_LOOP, settings.run_log_prune_seconds)
            except Exception as exc:
                logger.warning("run log pruning failed", error=repr(exc))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), settings.run_log_prune_seconds)

    return run


async def take_message(executor: RunExecutor, message: Any) -> int | None:
    """The run a queue message names, claimed; None if there is none to run. A message that
    raises on its own (a run id PostgreSQL cannot hold, say) is terminated with an error line
    naming it, so that it holds up neither its batch nor, redelivered, later ones: the
    database stays the truth, and the sweeper enqueues again any run left pending."""
    run_id = run_id_of(message.data)  # total: None for a message that names no run
    try:
        claimed = await executor.claim(run_id) if run_id else None
    except Exception as exc:
        if is_outage(exc):
            raise
        logger.error(
            "run queue message terminated: it cannot be handled",
            loop=RUN_QUEUE_LOOP,
            run_id=run_id,
            data=message.data[:200].decode("utf-8", "replace"),
            error=describe(exc),
        )
        await message.term()
        return None
    await message.ack()
    return claimed


def run_loop(settings: Settings) -> WorkerLoop:
    async def run(runtime: ServiceRuntime, stop: asyncio.Event) -> None:
        runtime.progress.beat(RUN_QUEUE_LOOP, settings.run_poll_seconds)
        wake = NotifyListener(
            settings.database_url, RUNS_CHANNEL, poll_seconds=settings.run_poll_seconds
        )
        wake.start()
        active: set[asyncio.Task[None]] = set()
        policy = AddressPolicy.allowing(settings.allowed_networks)
        # No cap on connections across runs (aiohttp's default is 100 for the process): each
        # run's `concurrency` bounds its own, and a shared cap would let the runs of slow
        # sites hold every connection while the others wait (README, "Scale").
        proxy_connector = (
            # Proxies are the operator's: exempt from the policy only when the operator says so.
            aiohttp.TCPConnector(limit=0)
            if settings.allow_internal_proxies
            else guarded_connector(policy, limit=0)
        )
        async with (
            aiohttp.ClientSession(connector=guarded_connector(policy, limit=0)) as http,
            aiohttp.ClientSession(connector=proxy_connector) as proxy_http,
        ):
            browsers = BrowserPool(settings.chromium_path, settings.browser_pages_per_worker)
            executor = RunExecutor(runtime, settings, http, proxy_http, browsers)
            subscription = await listen_for_stops(runtime, executor.stops)
            queue: Any = None
            last_sweep = 0.0
            try:
                while not stop.is_set():
                    try:
                        if time.monotonic() - last_sweep > settings.requeue_after_seconds:
                            await executor.reap()
                            await executor.sweep()
                            last_sweep = time.monotonic()
                        if queue is None:
                            queue = await pull_subscription(runtime.nats.js)
                        room = settings.runs_per_worker - len(active)
                        messages = []
                        if room > 0:
                            try:
                                messages = await queue.fetch(
                                    room, timeout=settings.run_poll_seconds
                                )
                            except TimeoutError:
                                messages = []
                            for message in messages:
                                claimed = await take_message(executor, message)
                                if claimed is not None:
                                    task = asyncio.create_task(executor.execute(claimed))
                                    active.add(task)
                                    task.add_done_callback(active.discard)
                        runtime.progress.beat(RUN_QUEUE_LOOP, settings.run_poll_seconds)
                        if messages:
                            continue
                    except Exception as exc:
                        logger.warning("run loop failed", error=repr(exc))
                        queue = None
                    await wake.wait()
            finally:
                await wake.close()
                await subscription.unsubscribe()
                if active:
                    await asyncio.wait(active, timeout=10)
                await browsers.close()

    return run
