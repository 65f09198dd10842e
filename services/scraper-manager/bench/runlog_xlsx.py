"""Two figures of issue 16: the crawl with and without the run log (2,000 pages, 10 % of them
failing), and the XLSX export's peak memory for 100,000 items. Prints a table."""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
import tracemalloc
from typing import Any

import aiohttp
from aiohttp import web
from scraper_manager.crawler.engine import Crawl, CrawlConfig
from scraper_manager.crawler.runlog import RunLog
from scraper_manager.runs.export import XlsxRows

PAGES = 2000
ROUNDS = 3


async def site() -> tuple[web.AppRunner, str]:
    async def handle(request: web.Request) -> web.Response:
        n = int(request.match_info["n"])
        if n % 10 == 5:  # 10 % fail, each an error line in the log
            return web.Response(status=404)
        links = "".join(f'<a href="/p/{t}">{t}</a>' for t in (n + 1, n + 2, n + 3) if t < PAGES)
        body = f"<html><head><title>Page {n}</title></head><body><h1>{n}</h1>{links}</body></html>"
        return web.Response(text=body, content_type="text/html")

    app = web.Application()
    app.router.add_get("/p/{n}", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    tcp = web.TCPSite(runner, "127.0.0.1", 0)
    await tcp.start()
    port = getattr(tcp._server, "sockets", [])[0].getsockname()[1]
    return runner, f"http://127.0.0.1:{port}/p/0"


async def crawl(start: str, with_log: bool) -> tuple[float, int]:
    async def sink(batch: list[tuple[str, dict[str, Any]]]) -> None:
        return None

    log = RunLog(10_000) if with_log else None
    async with aiohttp.ClientSession() as http:
        engine = Crawl(
            CrawlConfig(
                url=start,
                rate_limit=100_000,
                max_pages=PAGES,
                obey_robots=False,
                concurrency=8,
                max_retries=0,
            ),
            http,
            user_agent="bench",
            on_items=sink,
            stop=asyncio.Event(),
            log=log,
        )
        started = time.perf_counter()
        await engine.run()
        return time.perf_counter() - started, len(log.take()) if log else 0


def xlsx_peak(items: int) -> tuple[float, float, int]:
    tracemalloc.start()
    started = time.perf_counter()
    rows = XlsxRows(["url", "name", "price", "tags"])
    batch = [
        {
            "url": f"https://shop.example/p/{n}",
            "name": f"Item {n}",
            "price": n / 100,
            "tags": ["a", "b"],
        }
        for n in range(1000)
    ]
    for _ in range(items // len(batch)):
        rows.append(batch)
    with tempfile.TemporaryFile() as target:
        rows.save(target)
        size = target.tell()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return time.perf_counter() - started, peak / 2**20, size


async def main() -> None:
    runner, start = await site()
    try:
        times: dict[bool, list[float]] = {False: [], True: []}
        lines = 0
        for _ in range(ROUNDS):
            for with_log in (False, True):
                seconds, written = await crawl(start, with_log)
                times[with_log].append(seconds)
                lines = max(lines, written)
    finally:
        await runner.cleanup()
    without, with_ = statistics.median(times[False]), statistics.median(times[True])
    print(f"\nrun log: crawl of {PAGES} pages, 10 % failing, median of {ROUNDS}")
    print(f"{'variant':12} | {'seconds':>8}")
    print("-" * 24)
    print(f"{'without log':12} | {without:>8.3f}")
    print(f"{'with log':12} | {with_:>8.3f}   ({lines} lines)")
    print(f"overhead: {(with_ / without - 1) * 100:+.1f} % (target <= 5 %)")
    for items in (10_000, 100_000):
        seconds, peak, size = xlsx_peak(items)
        print(
            f"XLSX of {items} items: {seconds:.1f} s (under tracemalloc), peak Python memory {peak:.1f} MiB, "
            f"file {size / 2**20:.1f} MiB"
        )


if __name__ == "__main__":
    asyncio.run(main())
