"""Browser pages against HTTP pages on the same local site (issue 33): the crawl engine over
the benchmark site (site.py) once as HTTP pages and once rendered by headless Chromium
through the egress proxy, as the worker does it. Prints pages/s and CPU per page, the CPU of
Chromium and Playwright's driver included (they are this process's children, counted once
they exit)."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
from scraper_manager.crawler.browser import BrowserPool, PageRenderer
from scraper_manager.crawler.egress import EgressProxy
from scraper_manager.crawler.engine import Crawl, CrawlConfig
from servicekit.embedded.network import free_port, wait_for_port
from servicekit.net import AddressPolicy, guarded_connector

HERE = Path(__file__).resolve().parent
LOOPBACK = AddressPolicy.allowing(["127.0.0.0/8"])


def cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


async def crawl(start: str, pages: int, concurrency: int, browser: bool) -> dict[str, Any]:
    async def sink(batch: list[tuple[str, dict[str, Any]]]) -> None:
        return None

    pool = BrowserPool(os.environ.get("CHROMIUM", "/usr/bin/chromium"), concurrency)
    renderer = PageRenderer(pool, EgressProxy(LOOPBACK), user_agent="bench", timeout_seconds=30)
    before = cpu_seconds()
    started = time.perf_counter()
    if browser:
        await renderer.open()
    async with aiohttp.ClientSession(connector=guarded_connector(LOOPBACK)) as http:
        engine = Crawl(
            CrawlConfig(
                url=start,
                rate_limit=1e9,
                max_pages=pages,
                obey_robots=False,
                concurrency=concurrency,
            ),
            http,
            user_agent="bench",
            on_items=sink,
            stop=asyncio.Event(),
            render=renderer.render if browser else None,
        )
        stats = await engine.run()
    elapsed = time.perf_counter() - started
    if browser:
        await renderer.close()
        await pool.close()
    return {
        "pages": stats.pages_fetched,
        "items": stats.items_collected,
        "seconds": elapsed,
        # Launch and shutdown included: a worker pays them once, a bench run once too.
        "cpu_seconds": cpu_seconds() - before,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def run_one(start: str, pages: int, concurrency: int, browser: bool) -> dict[str, Any]:
    """Each in a process of its own, so the CPU counted is that crawl's alone."""
    result = subprocess.run(
        [sys.executable, __file__, "--one", start, str(pages), str(concurrency), str(browser)],
        check=True,
        capture_output=True,
        text=True,
        timeout=900,
    )
    return dict(json.loads(result.stdout.strip().splitlines()[-1]))


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--one":
        start, pages, concurrency, rendered = sys.argv[2:6]
        print(
            json.dumps(asyncio.run(crawl(start, int(pages), int(concurrency), rendered == "True")))
        )
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()
    port = free_port()
    site = subprocess.Popen(
        [sys.executable, str(HERE / "site.py"), str(port), str(args.pages)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port("127.0.0.1", port, 30)
        start = f"http://127.0.0.1:{port}/p/0"
        http = run_one(start, args.pages, args.concurrency, browser=False)
        browser = run_one(start, args.pages, args.concurrency, browser=True)
    finally:
        site.terminate()
        site.wait(10)
    print(
        f"\nBrowser pages vs HTTP pages: {args.pages}-page local site, concurrency "
        f"{args.concurrency} (browser: {args.concurrency} pages at once), images/media/fonts blocked\n"
    )
    print(f"{'render':8} | {'pages':>6} | {'pages/s':>8} | {'CPU ms / page':>14} | {'py MB':>8}")
    print("-" * 56)
    # py MB: this process's peak (Chromium's renderers are other processes, not counted).

    for name, stats in (("http", http), ("browser", browser)):
        print(
            f"{name:8} | {stats['pages']:>6} | {stats['pages'] / stats['seconds']:>8.1f} | "
            f"{stats['cpu_seconds'] / stats['pages'] * 1000:>14.1f} | {stats['peak_rss_mb']:>8.0f}"
        )
    slower = (http["pages"] / http["seconds"]) / (browser["pages"] / browser["seconds"])
    costlier = (browser["cpu_seconds"] / browser["pages"]) / (http["cpu_seconds"] / http["pages"])
    print(f"\nbrowser: {slower:.1f}x fewer pages/s, {costlier:.1f}x the CPU per page")
    return 0 if browser["pages"] == http["pages"] == args.pages else 1


if __name__ == "__main__":
    sys.exit(main())
