"""Crawl the benchmark site with our engine, writing items as JSON lines; prints stats JSON."""

from __future__ import annotations

import asyncio
import json
import resource
import sys
import time
from typing import Any, TextIO

import aiohttp
import uvloop
from scraper_manager.crawler.engine import Crawl, CrawlConfig
from servicekit.net import AddressPolicy, guarded_connector


async def crawl(
    start: str, out: TextIO, concurrency: int, rate: float, max_pages: int
) -> dict[str, Any]:
    async def sink(batch: list[tuple[str, dict[str, Any]]]) -> None:
        out.write("".join(json.dumps(item) + "\n" for _, item in batch))

    # As the worker connects: through the address guard (the site is on loopback).
    connector = guarded_connector(AddressPolicy.allowing(["127.0.0.0/8"]), limit=concurrency * 2)
    async with aiohttp.ClientSession(connector=connector) as http:
        engine = Crawl(
            CrawlConfig(
                url=start,
                rate_limit=rate,
                max_pages=max_pages,
                obey_robots=False,
                concurrency=concurrency,
                timeout_seconds=30,
            ),
            http,
            user_agent="bench",
            on_items=sink,
            stop=asyncio.Event(),
        )
        started = time.perf_counter()
        stats = await engine.run()
        elapsed = time.perf_counter() - started
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "pages": stats.pages_fetched,
        "seconds": elapsed,
        "cpu_seconds": usage.ru_utime + usage.ru_stime,
        "peak_rss_mb": usage.ru_maxrss / 1024,
    }


if __name__ == "__main__":
    start, out_path = sys.argv[1], sys.argv[2]
    concurrency, rate, max_pages = int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
    with open(out_path, "w") as out:
        print(json.dumps(uvloop.run(crawl(start, out, concurrency, rate, max_pages))))
