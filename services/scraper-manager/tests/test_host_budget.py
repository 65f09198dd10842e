"""One politeness budget per site: the slot arithmetic (pure), the same rule in PostgreSQL,
and the host's own record of requests from runs on two worker processes and from two crawls
sharing a robots.txt crawl delay."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import pytest
from aiohttp import web
from scraper_manager.crawler.engine import Collected, Crawl, CrawlConfig
from scraper_manager.crawler.host_budget import (
    PgHostBudget,
    host_interval,
    host_of,
    next_slot,
    prune_idle_hosts,
)
from scraper_manager.runs.retention import run_retention_loop
from scraper_manager.settings import Settings
from servicekit.db.engine import create_engine, create_session_factory
from servicekit.embedded.network import free_port
from servicekit.net import AddressPolicy, guarded_connector
from servicekit.runtime import NatsConnection, ServiceRuntime
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.conftest import LOOPBACK
from tests.factories import make_client, scraper_body
from tests.processes import _ready, _stop, environment

BASE = "/api/v1/scrapers"


# --- the rule ---------------------------------------------------------------------------


def test_the_first_request_to_a_host_goes_at_once() -> None:
    assert next_slot(None, 100.0, 0.5) == 100.0


def test_a_request_waits_one_interval_after_the_last_slot() -> None:
    assert next_slot(100.0, 100.1, 0.5) == 100.5


def test_slots_queue_behind_each_other_when_requests_ask_together() -> None:
    last = None
    slots = []
    for _ in range(4):
        last = next_slot(last, 10.0, 0.25)
        slots.append(last)
    assert slots == [10.0, 10.25, 10.5, 10.75]


def test_an_idle_host_saves_up_no_burst() -> None:
    # Long after the last slot, the next request goes now, and the one after waits again.
    first = next_slot(0.0, 50.0, 0.1)
    assert first == 50.0
    assert next_slot(first, 50.0, 0.1) == pytest.approx(50.1)


def test_the_interval_is_the_operators_budget_with_room_for_the_way_to_the_host() -> None:
    # 10 a second: 105 ms apart, so 11 requests span 1.05 s and a 50 ms spread in their way
    # to the host still leaves at most 10 in any second there.
    assert host_interval(10.0, None) == pytest.approx(0.105)


def test_a_longer_crawl_delay_wins_over_the_budget() -> None:
    assert host_interval(10.0, 2.0) == 2.0
    assert host_interval(0.25, 2.0) == pytest.approx(4.2)


def test_a_crawl_delay_alone_is_shared() -> None:
    assert host_interval(None, 1.5) == 1.5


def test_without_budget_or_delay_nothing_is_shared() -> None:
    assert host_interval(None, None) is None
    assert host_interval(None, 0.0) is None


def test_the_host_key_is_the_host_name_without_port_or_case() -> None:
    assert host_of("http://Shop.Example:8080/a?b") == "shop.example"
    assert host_of("https://shop.example./") == "shop.example"
    assert host_of("http://[::1]:80/") == "::1"


def test_a_url_without_a_host_has_no_budget() -> None:
    assert host_of("file:///etc/passwd") is None
    assert host_of("http://[::1/") is None


# --- the rule in PostgreSQL -------------------------------------------------------------


async def test_postgresql_grants_the_slots_the_rule_gives(db_engine: AsyncEngine) -> None:
    budget = PgHostBudget(db_engine)
    host = f"rule-{time.time_ns()}.example"
    waits = [await budget.reserve(host, 10.0) for _ in range(3)]
    # Asked within milliseconds of each other: now, then one and two intervals later.
    assert waits[0] == 0
    assert waits[1] == pytest.approx(10.0, abs=0.5)
    assert waits[2] == pytest.approx(20.0, abs=0.5)


async def hosts_with_slots(engine: AsyncEngine, **ages: float) -> dict[str, str]:
    """A row per host whose last slot was `age` seconds ago (negative: a slot still ahead);
    the names given, made unique to this test."""
    suffix = time.time_ns()
    names = {name: f"{name}-{suffix}.example" for name in ages}
    async with engine.begin() as connection:
        for name, age in ages.items():
            await connection.execute(
                text(
                    "INSERT INTO host_budgets (host, last_at)"
                    " VALUES (:host, now() - make_interval(secs => :age))"
                ),
                {"host": names[name], "age": age},
            )
    return names


async def hosts_left(engine: AsyncEngine, names: dict[str, str]) -> set[str]:
    async with engine.connect() as connection:
        rows = await connection.execute(
            text("SELECT host FROM host_budgets WHERE host = ANY(:hosts)"),
            {"hosts": list(names.values())},
        )
        left = {row[0] for row in rows}
    return {name for name, host in names.items() if host in left}


async def test_hosts_idle_past_the_bound_are_pruned_and_the_others_kept(
    db_engine: AsyncEngine,
) -> None:
    names = await hosts_with_slots(
        db_engine, idle=2 * 86_400, recent=60.0, ahead=-30.0, just_within=86_000
    )
    pruned = await prune_idle_hosts(db_engine, 86_400)
    assert pruned >= 1
    assert await hosts_left(db_engine, names) == {"recent", "ahead", "just_within"}


async def test_idle_hosts_are_pruned_batch_by_batch(db_engine: AsyncEngine) -> None:
    names = await hosts_with_slots(db_engine, **{f"h{n}": 7_200.0 for n in range(5)})
    assert await prune_idle_hosts(db_engine, 3_600, batch=2) >= 5
    assert await hosts_left(db_engine, names) == set()


async def test_a_pruned_host_is_granted_its_next_request_at_once(db_engine: AsyncEngine) -> None:
    # Pruning decides nothing: a host idle past the bound gets what a new host gets.
    names = await hosts_with_slots(db_engine, idle=7_200.0)
    await prune_idle_hosts(db_engine, 3_600)
    assert await PgHostBudget(db_engine).reserve(names["idle"], 10.0) == 0


async def test_the_workers_retention_round_prunes_idle_hosts(
    service_settings: Settings, db_engine: AsyncEngine
) -> None:
    names = await hosts_with_slots(db_engine, idle=7_200.0, recent=10.0)
    settings = service_settings.model_copy(update={"host_budget_idle_seconds": 3_600.0})
    runtime = ServiceRuntime(
        settings, db_engine, create_session_factory(db_engine), NatsConnection(settings, None)
    )
    stop = asyncio.Event()
    # The loop's first round runs as it starts; the next would come a retention period later.
    loop = asyncio.create_task(run_retention_loop(settings)(runtime, stop))
    try:
        for _ in range(300):
            if "idle" not in await hosts_left(db_engine, names):
                break
            await asyncio.sleep(0.1)
    finally:
        stop.set()
        await asyncio.wait_for(loop, 30)
    assert await hosts_left(db_engine, names) == {"recent"}


# --- at the host ------------------------------------------------------------------------


class RecordingSite:
    """A site on loopback that records the time of every request it answers (robots.txt
    included): what the host sees."""

    def __init__(self, pages: int, robots: str = "") -> None:
        self.pages = pages
        self.robots = robots
        self.times: list[float] = []
        self.page_times: list[float] = []
        self.port = 0
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _robots(self, request: web.Request) -> web.Response:
        self.times.append(time.monotonic())
        return web.Response(text=self.robots)

    async def _page(self, request: web.Request) -> web.Response:
        self.times.append(time.monotonic())
        self.page_times.append(self.times[-1])
        n = int(request.match_info["n"])
        links = "".join(
            f'<a href="/{request.match_info["s"]}/{m}">p</a>'
            for m in (n + 1, n + 2)
            if m < self.pages
        )
        return web.Response(
            text=f"<html><title>{n}</title><body>{links}</body></html>",
            content_type="text/html",
        )

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/robots.txt", self._robots)
        app.router.add_get("/{s}/{n}", self._page)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self.port = int(self._runner.addresses[0][1])

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def most_in_one_second(self, pages_only: bool = False) -> int:
        """The most requests within any window of one second (starting at each request)."""
        times = sorted(self.page_times if pages_only else self.times)
        return max(sum(1 for t in times[i:] if t < start + 1.0) for i, start in enumerate(times))


@pytest.fixture
async def recording_site() -> AsyncIterator[RecordingSite]:
    site = RecordingSite(pages=10)
    await site.start()
    yield site
    await site.stop()


@contextlib.contextmanager
def two_workers(settings: Settings) -> Iterator[None]:
    """Two `scraper-manager worker` processes, both ready before this yields."""
    executable = str(Path(sys.executable).parent / "scraper-manager")
    processes: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(2):
            port = free_port()
            env = environment(
                settings.model_copy(update={"worker_probe_port": port, "log_level": "WARNING"})
            )
            process = subprocess.Popen([executable, "worker"], env=env, stdout=subprocess.DEVNULL)
            processes.append(process)
            _ready(f"http://127.0.0.1:{port}", process, "worker")
        yield
    finally:
        _stop(processes)


async def wait_until_finished(
    client: httpx.AsyncClient, headers: dict[str, str], runs: list[tuple[int, int]]
) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        found = [
            (await client.get(f"{BASE}/{s}/runs/{r}", headers=headers)).json() for s, r in runs
        ]
        if all(run["status"] in {"completed", "failed", "stopped"} for run in found):
            return found
        await asyncio.sleep(0.5)
    raise AssertionError(f"runs did not finish: {found}")


async def test_runs_on_two_workers_share_the_hosts_budget(
    service_settings: Settings,
    client: httpx.AsyncClient,
    db_engine: AsyncEngine,
    recording_site: RecordingSite,
) -> None:
    budget = 4
    settings = service_settings.model_copy(
        update={
            "host_budget_per_second": float(budget),
            # Two runs each: the four runs are crawled by both processes.
            "runs_per_worker": 2,
            "run_poll_seconds": 0.2,
            "heartbeat_seconds": 0.5,
        }
    )
    who = await make_client(db_engine, "write")
    with two_workers(settings):
        runs = []
        for n in range(4):
            body = scraper_body(
                url=f"{recording_site.url}/s{n}/0", rate_limit=20, concurrency=4, max_pages=10
            )
            created = await client.post(BASE, json=body, headers=who.headers)
            scraper_id = created.json()["id"]
            run = await client.post(f"{BASE}/{scraper_id}/run", headers=who.headers)
            runs.append((scraper_id, run.json()["run_id"]))
        finished = await wait_until_finished(client, who.headers, runs)
    assert [run["status"] for run in finished] == ["completed"] * 4
    assert sum(run["stats"]["pages_fetched"] for run in finished) == 40
    async with db_engine.connect() as connection:
        workers = await connection.scalar(
            text("SELECT count(DISTINCT worker_id) FROM runs WHERE id = ANY(:ids)"),
            {"ids": [r for _, r in runs]},
        )
    assert workers == 2
    # Four runs of 20/s each would send 80/s; the host sees its budget, one request of
    # tolerance for the jitter between a slot and its arrival.
    assert recording_site.most_in_one_second() <= budget + 1


async def test_two_crawls_share_a_robots_crawl_delay(database_url: str) -> None:
    site = RecordingSite(pages=6, robots="User-agent: *\nCrawl-delay: 0.5\n")
    await site.start()
    # Each crawl with its own database connections, as on two workers.
    engines = [create_engine(Settings(database_url=database_url)) for _ in range(2)]
    policy = AddressPolicy.allowing(LOOPBACK)
    try:
        async with (
            aiohttp.ClientSession(connector=guarded_connector(policy)) as one,
            aiohttp.ClientSession(connector=guarded_connector(policy)) as two,
        ):

            async def sink(batch: list[Collected]) -> None:
                return None

            crawls = [
                Crawl(
                    CrawlConfig(url=f"{site.url}/c{n}/0", rate_limit=50, concurrency=4),
                    http,
                    user_agent="scraper-manager/0.1",
                    on_items=sink,
                    stop=asyncio.Event(),
                    host_budget=PgHostBudget(engine),
                )
                for n, (http, engine) in enumerate(zip((one, two), engines, strict=True))
            ]
            results = await asyncio.gather(*(crawl.run() for crawl in crawls))
    finally:
        for engine in engines:
            await engine.dispose()
        await site.stop()
    assert [stats.pages_fetched for stats in results] == [6, 6]
    # A delay of 0.5 s: two pages a second from both crawls together (each alone would
    # send two), plus the tolerance of one. robots.txt itself is read before its delay is
    # known, so it is left out of the count.
    assert site.most_in_one_second(pages_only=True) <= 3
