"""A crawl's requests each end at the scraper's `timeout_seconds` (its connection, its answer,
its body): on timers the requests of one rounded deadline share, a request still running when
its deadline comes ends in `TimeoutError` (retried, then failed, as before), one that ended
before is untouched, and a stop's cancellation goes through as a cancellation. Against a site
on loopback that stalls."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web
from scraper_manager.crawler.deadlines import Deadlines
from scraper_manager.crawler.engine import Crawl, CrawlConfig
from servicekit.net import AddressPolicy, guarded_connector


async def test_a_request_running_at_its_deadline_ends_in_timeout_error() -> None:
    deadlines = Deadlines(0.05, resolution=0.05, ceil_threshold=0)
    with pytest.raises(TimeoutError), deadlines.limit():
        await asyncio.sleep(30)


async def test_requests_sharing_a_deadline_time_out_only_while_still_running() -> None:
    deadlines = Deadlines(0.2, resolution=0.2, ceil_threshold=0)
    started = asyncio.Event()

    async def quick() -> str:
        with deadlines.limit():
            started.set()
            return "done"

    async def stalled() -> str:
        with deadlines.limit():
            await started.wait()
            await asyncio.sleep(30)
            return "done"

    results = await asyncio.gather(stalled(), quick(), return_exceptions=True)
    assert isinstance(results[0], TimeoutError)
    assert results[1] == "done"


async def test_a_limit_under_the_rounding_threshold_keeps_its_own_exact_timer() -> None:
    deadlines = Deadlines(0.05)  # aiohttp rounds only limits above 5 s
    with pytest.raises(TimeoutError), deadlines.limit():
        await asyncio.sleep(30)


async def test_a_limit_of_exactly_the_threshold_is_exact_as_in_aiohttp() -> None:
    limit = Deadlines(5.0).limit()
    assert limit.handle is not None  # its own timer, at exactly 5 s
    limit.handle.cancel()
    assert Deadlines(5.5).limit().handle is None  # rounded: the second's shared timer


async def test_an_expiry_the_request_turns_into_another_error_leaves_the_task_uncancelled() -> None:
    deadlines = Deadlines(0.05, resolution=0.05, ceil_threshold=0)
    task = asyncio.current_task()
    assert task is not None
    before = task.cancelling()

    async def torn_down_when_cancelled() -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            # what a connection's teardown may do with the cancel
            raise ConnectionResetError("closed while cancelled") from None

    with pytest.raises(ConnectionResetError), deadlines.limit():
        await torn_down_when_cancelled()
    # The task serves the next URL: a cancel left pending would cut its next await short.
    assert task.cancelling() == before
    await asyncio.sleep(0)


async def test_a_stop_cancelling_a_request_is_a_cancellation_not_a_timeout() -> None:
    deadlines = Deadlines(30)
    entered = asyncio.Event()

    async def request() -> None:
        with deadlines.limit():
            entered.set()
            await asyncio.sleep(30)

    task = asyncio.create_task(request())
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


class StallingSite:
    """/fast answers at once; /slow answers after 30 s; /stalled-body sends its headers and
    the start of its body, then nothing for 30 s."""

    def __init__(self) -> None:
        self._runner: web.AppRunner | None = None
        self.port = 0

    async def _fast(self, request: web.Request) -> web.Response:
        return web.Response(text="<html><h1>fast</h1></html>", content_type="text/html")

    async def _slow(self, request: web.Request) -> web.Response:
        await asyncio.sleep(30)
        return web.Response(text="<html><h1>slow</h1></html>", content_type="text/html")

    async def _stalled_body(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/html"})
        await response.prepare(request)
        await response.write(b"<html><h1>start")
        await asyncio.sleep(30)
        return response

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/fast", self._fast)
        app.router.add_get("/slow", self._slow)
        app.router.add_get("/stalled-body", self._stalled_body)
        self._runner = web.AppRunner(app, shutdown_timeout=0.1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


@pytest.fixture
async def stalling() -> AsyncIterator[StallingSite]:
    site = StallingSite()
    await site.start()
    yield site
    await site.stop()


async def crawl_once(site: StallingSite, path: str) -> Crawl:
    config = CrawlConfig(
        url=f"http://127.0.0.1:{site.port}{path}",
        rate_limit=100,
        max_pages=1,
        obey_robots=False,
        timeout_seconds=1,
        max_retries=0,
    )
    connector = guarded_connector(AddressPolicy.allowing(["127.0.0.0/8"]))
    async with aiohttp.ClientSession(connector=connector) as http:

        async def keep(batch: object) -> None:
            return None

        crawl = Crawl(config, http, user_agent="t", on_items=keep, stop=asyncio.Event())
        await crawl.run()
    return crawl


@pytest.mark.parametrize("path", ["/slow", "/stalled-body"])
async def test_a_page_past_the_scrapers_timeout_fails_with_a_timeout_error(
    stalling: StallingSite, path: str
) -> None:
    crawl = await crawl_once(stalling, path)
    assert (crawl.stats.pages_fetched, crawl.stats.requests_failed) == (0, 1)
    assert crawl.stats.last_error is not None
    assert "TimeoutError" in crawl.stats.last_error


async def test_a_page_within_the_scrapers_timeout_is_fetched(stalling: StallingSite) -> None:
    crawl = await crawl_once(stalling, "/fast")
    assert (crawl.stats.pages_fetched, crawl.stats.requests_failed) == (1, 0)
    assert crawl.stats.items_collected == 1
