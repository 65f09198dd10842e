"""A browser page's own requests are paced as pages are: each request through the egress
proxy (a script, a stylesheet, XHR or fetch, an iframe, a redirect hop) takes a turn of the
run's rate limit and a slot of its host's budget (PostgreSQL), before it goes out; a tunnel
(https) is admitted once, when it opens. Requests the browser never makes (images, media and
fonts, blocked) take nothing."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from scraper_manager.crawler.browser import BrowserPool, PageRenderer, pace_and_route
from scraper_manager.crawler.egress import EgressProxy, read_head
from scraper_manager.crawler.engine import Crawl, CrawlConfig
from scraper_manager.crawler.host_budget import PgHostBudget
from servicekit.net import guarded_connector
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.test_browser_render import CHROMIUM, PUBLIC_ONLY, page
from tests.test_crawl_safety import Site


@pytest.fixture(scope="module")
async def pool() -> AsyncIterator[BrowserPool]:
    pool = BrowserPool(CHROMIUM, pages=2)
    yield pool
    await pool.close()


@pytest.fixture
async def site() -> AsyncIterator[Site]:
    site = Site("127.0.0.1")
    await site.start()
    yield site
    await site.stop()


async def test_a_page_with_four_subrequests_takes_five_turns_of_the_rate_limit_and_budget(
    pool: BrowserPool, site: Site, db_engine: AsyncEngine
) -> None:
    site.pages["/"] = page(
        "fetch('/data.json').catch(() => {});",
        body='<link rel="stylesheet" href="/site.css"><script src="/app.js"></script>'
        '<iframe src="/frame.html"></iframe><img src="/photo.png">',
    )
    for path in ("/site.css", "/app.js", "/frame.html", "/data.json"):
        site.pages[path] = "/* ok */"

    async def sink(batch: list[Any]) -> None:
        return None

    egress = EgressProxy(PUBLIC_ONLY)
    renderer = PageRenderer(pool, egress, user_agent="t", timeout_seconds=10)
    async with aiohttp.ClientSession(connector=guarded_connector(PUBLIC_ONLY)) as http:
        crawl = Crawl(
            # Budgets high enough not to wait: what is counted is the turns taken.
            CrawlConfig(
                url=f"{site.url}/",
                obey_robots=False,
                max_retries=0,
                rate_limit=1000,
                host_budget_per_second=1000,
            ),
            http,
            user_agent="t",
            on_items=sink,
            stop=asyncio.Event(),
            render=renderer.render,
            host_budget=PgHostBudget(db_engine),
        )
        pace_and_route(egress, crawl)  # as the worker wires a browser run
        await renderer.open()
        try:
            stats = await crawl.run()
        finally:
            await renderer.close()
    assert stats.pages_fetched == 1
    # The document and its 4 requests went out; the image was never asked for.
    assert sorted(site.hits) == ["/", "/app.js", "/data.json", "/frame.html", "/site.css"]
    assert crawl.bucket.taken == 5
    assert crawl.host_slots == 5


async def test_a_request_through_the_egress_proxy_waits_for_its_turn(site: Site) -> None:
    site.pages["/data"] = "ok"
    turn = asyncio.Event()
    waiting = asyncio.Event()
    asked: list[str] = []

    async def admit(url: str) -> None:
        asked.append(url)
        waiting.set()
        await turn.wait()

    egress = EgressProxy(PUBLIC_ONLY, admit=admit)
    await egress.start()
    try:
        async with aiohttp.ClientSession() as http:
            request = asyncio.create_task(
                http.get(f"{site.url}/data", proxy=egress.url).__aenter__()
            )
            await asyncio.wait_for(waiting.wait(), 30)
            assert site.hits == []  # asked for its turn, not yet sent
            turn.set()
            response = await request
            body = await response.text()
            response.release()
    finally:
        await egress.close()
    assert asked == [f"{site.url}/data"]
    assert body == "ok"
    assert site.hits == ["/data"]


async def test_a_tunnel_takes_one_turn_when_it_opens(site: Site) -> None:
    """What goes inside a tunnel is encrypted: it is admitted once, for its host."""
    site.pages["/a"] = "a"
    asked: list[str] = []

    async def admit(url: str) -> None:
        asked.append(url)

    egress = EgressProxy(PUBLIC_ONLY, admit=admit)
    await egress.start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", egress.port)
        writer.write(f"CONNECT 127.0.0.1:{site.port} HTTP/1.1\r\n\r\n".encode())
        await writer.drain()
        assert (await read_head(reader) or b"").startswith(b"HTTP/1.1 200")
        for _ in range(2):
            writer.write(b"GET /a HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            await writer.drain()
            assert (await read_head(reader) or b"").startswith(b"HTTP/1.1 200")
            await reader.readexactly(1)  # the body, "a"
        writer.close()
    finally:
        await egress.close()
    assert site.hits == ["/a", "/a"]
    assert asked == [f"https://127.0.0.1:{site.port}/"]
