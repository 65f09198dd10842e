"""Two figures of issue 33, measured through the worker's own code on an embedded PostgreSQL
(a temporary folder, migrated to head) that the script starts and stops itself.

1. Incremental crawls: the worker's `RunExecutor.execute` crawls a local site of 2,000 linked
   pages (its own process) that sends an `ETag` and a `Last-Modified` with every page and
   answers 304 to a matching `If-None-Match`. The first run fetches every page whole; the
   second, with nothing changed, revalidates. Printed: the share of pages answered 304, the
   bytes received (bodies) and the worker's CPU per page of each run (this process's CPU
   time over the run: fetching, parsing, storing items, heartbeats, the run's end). The runs
   go on the event loop and collector settings `scraper-manager worker` runs them on (uvloop,
   `collect_less_often`, `keep_out_of_collections`); `--asyncio` measures on the standard
   library's loop instead. `--repeat N` crawls N pairs of runs (a new scraper each) and
   prints each pair's ratio: the machine may be shared, compare within a pair.
2. Change detection: two completed runs of 100,000 items each (the second with 5,000 items
   changed in one field, 1,000 removed and 1,000 added) are compared as a run's end compares
   them (`detect_changes`, one SQL statement), in a child process: the seconds it takes and
   the child's peak RSS (all of the worker-side memory: Python, the driver, the rows).

Run: `uv run --frozen python services/scraper-manager/bench/changes_revalidation.py` (`make
bench` runs it after the crawl benchmark). Every child has a timeout.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import logging
import resource
import sys
import time
from typing import Any

import aiohttp
import structlog
import uvloop
from aiohttp import web
from harness import OWNER, child_figures, new_run, runtime_for, settings_for, site_and_database
from scraper_manager.models import Run, RunStatus, Scraper
from scraper_manager.runner import RunExecutor
from scraper_manager.runs.changes import detect_changes
from servicekit.cli import collect_less_often, keep_out_of_collections
from servicekit.db.engine import create_engine, create_session_factory
from servicekit.net import AddressPolicy, guarded_connector
from sqlalchemy import text

PAGES = 2000
ITEMS = 100_000


def serve_site(port: int) -> None:
    """2,000 pages, three links each, with validators; 304 when If-None-Match matches."""

    async def handle(request: web.Request) -> web.Response:
        n = int(request.match_info["n"])
        links = "".join(f'<a href="/p/{t}">{t}</a>' for t in (n + 1, n + 2, n + 3) if t < PAGES)
        filler = "<p>" + "Lorem ipsum dolor sit amet. " * 150 + "</p>"
        body = (
            f"<html><head><title>Page {n}</title></head><body><h1>Item {n}</h1>"
            f'<span class="price">{n}.99</span>{filler}{links}</body></html>'
        )
        etag = '"' + hashlib.sha256(body.encode()).hexdigest()[:16] + '"'
        headers = {"ETag": etag, "Last-Modified": "Sun, 22 Nov 2026 10:00:00 GMT"}
        if request.headers.get("If-None-Match") == etag:
            return web.Response(status=304, headers=headers)
        return web.Response(text=body, content_type="text/html", headers=headers)

    app = web.Application()
    app.router.add_get("/p/{n}", handle)
    web.run_app(app, host="127.0.0.1", port=port, access_log=None, print=None)


async def crawls(url: str, start: str) -> list[dict[str, Any]]:
    settings = settings_for(url)
    runtime = runtime_for(settings)
    engine = runtime.engine
    async with runtime.session_factory() as session, session.begin():
        scraper = Scraper(
            owner=OWNER,
            name=f"bench-{time.time_ns()}",
            url=start,
            # Above the API's bound (100): the figures are the crawl's work, not its waits.
            rate_limit=10_000,
            max_pages=PAGES,
            obey_robots=False,
            concurrency=16,
            selectors={"name": "h1::text", "price": "span.price::text"},
            item_key="url",
        )
        session.add(scraper)
        await session.flush()
        scraper_id = scraper.id
    figures = []
    connector = guarded_connector(AddressPolicy.allowing(["127.0.0.0/8"]), limit=64)
    async with aiohttp.ClientSession(connector=connector) as http:
        executor = RunExecutor(runtime, settings, http)
        for _ in range(2):
            run_id = await new_run(runtime, scraper_id)
            before = resource.getrusage(resource.RUSAGE_SELF)
            started = time.perf_counter()
            await executor.execute(run_id)
            seconds = time.perf_counter() - started
            after = resource.getrusage(resource.RUSAGE_SELF)
            async with engine.connect() as connection:
                pages, not_modified, received, status = (
                    await connection.execute(
                        text(
                            "SELECT pages_fetched, not_modified, bytes_received, status"
                            " FROM runs WHERE id = :id"
                        ),
                        {"id": run_id},
                    )
                ).one()
            cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
            figures.append(
                {
                    "status": status,
                    "pages": pages,
                    "not_modified": not_modified,
                    "bytes": received,
                    "seconds": seconds,
                    "cpu_ms_per_page": cpu / max(pages, 1) * 1000,
                }
            )
    await engine.dispose()
    return figures


SEED = text(
    """
    INSERT INTO items (run_id, scraper_id, url, data, created_at)
    SELECT :run, :scraper, 'https://shop.example/p/' || n,
           jsonb_build_object('sku', 'sku-' || n, 'name', 'Item ' || n,
                              'price', CASE WHEN :changed AND n % 20 = 0 THEN n / 10.0
                                            ELSE n / 100.0 END,
                              'tags', CAST('["a", "b"]' AS jsonb)),
           now()
    FROM generate_series(:first, :last) AS n
    """
)


async def seed_changes(url: str) -> tuple[int, int]:
    engine = create_engine(settings_for(url))
    async with create_session_factory(engine)() as session, session.begin():
        scraper = Scraper(owner=OWNER, name="diff", url="https://shop.example/", item_key="sku")
        session.add(scraper)
        await session.flush()
        runs = []
        for _ in range(2):
            run = Run(scraper_id=scraper.id, owner=OWNER, status=RunStatus.COMPLETED)
            session.add(run)
            await session.flush()
            runs.append(run.id)
        connection = await session.connection()
        base = {"scraper": scraper.id}
        await connection.execute(
            SEED, {**base, "run": runs[0], "changed": False, "first": 1, "last": ITEMS}
        )
        # 1,000 gone at the start, 1,000 new at the end, every 20th price changed.
        await connection.execute(
            SEED, {**base, "run": runs[1], "changed": True, "first": 1001, "last": ITEMS + 1000}
        )
        await connection.execute(text("ANALYZE items"))
        scraper_id = scraper.id
    await engine.dispose()
    return scraper_id, runs[1]


async def diff_child(url: str, scraper_id: int, run_id: int) -> dict[str, Any]:
    engine = create_engine(settings_for(url))
    async with engine.begin() as connection:
        await connection.execute(text("SELECT 1"))
        started = time.perf_counter()
        counts = await detect_changes(
            connection, scraper_id=scraper_id, run_id=run_id, item_key="sku"
        )
        seconds = time.perf_counter() - started
    await engine.dispose()
    return {
        "seconds": seconds,
        "counts": counts,
        "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--site", type=int)
    parser.add_argument("--child", nargs=3)
    parser.add_argument("--asyncio", action="store_true", help="the stdlib event loop")
    parser.add_argument("--repeat", type=int, default=1, help="pairs of crawls")
    parser.add_argument("--crawl-only", action="store_true", help="no change detection row")
    args = parser.parse_args()
    if args.site:
        serve_site(args.site)
        return 0
    if args.child:
        url, scraper_id, run_id = args.child
        print(json.dumps(asyncio.run(diff_child(url, int(scraper_id), int(run_id))), default=str))
        return 0
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    with site_and_database(__file__, "changes-bench-") as (url, port):
        start = f"http://127.0.0.1:{port}/p/0"
        if not args.asyncio:
            keep_out_of_collections()
            collect_less_often()
        pairs = [
            asyncio.run(crawls(url, start)) if args.asyncio else uvloop.run(crawls(url, start))
            for _ in range(args.repeat)
        ]
        if not args.crawl_only:
            scraper_id, run_id = asyncio.run(seed_changes(url))
            diff = child_figures(__file__, url, str(scraper_id), str(run_id))
    loop = "asyncio" if args.asyncio else "uvloop, as the worker"
    print(
        "\nIncremental crawl of an unchanged 2,000-page site with validators "
        f"(the worker; {loop})\n"
    )
    print(f"{'run':7} | {'pages':>5} | {'304':>5} | {'bytes':>10} | {'s':>6} | {'CPU ms/page':>11}")
    print("-" * 60)
    for first, second in pairs:
        for name, row in (("first", first), ("second", second)):
            print(
                f"{name:7} | {row['pages']:>5} | {row['not_modified']:>5} | {row['bytes']:>10} | "
                f"{row['seconds']:>6.2f} | {row['cpu_ms_per_page']:>11.3f}"
            )
        share = second["not_modified"] / max(second["pages"], 1) * 100
        byte_share = second["bytes"] / max(first["bytes"], 1) * 100
        cpu_share = second["cpu_ms_per_page"] / max(first["cpu_ms_per_page"], 1e-9) * 100
        print(
            f"\n304: {share:.1f} % of pages (target >= 95 %); bytes: {byte_share:.1f} % of the "
            f"first crawl's (<= 5 %); CPU per page: {cpu_share:.1f} % of the first crawl's "
            "(<= 25 %)\n"
        )
    if args.crawl_only:
        return 0
    counts = diff["counts"]
    print(
        f"\nChange detection, {ITEMS:,} items against {ITEMS:,}: {diff['seconds']:.2f} s "
        f"(target <= 5 s), worker peak RSS {diff['rss_mib']:.0f} MiB (<= 200 MiB); "
        f"added {counts['added']}, removed {counts['removed']}, changed {counts['changed']}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
