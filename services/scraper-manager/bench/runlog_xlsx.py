"""Two figures of issue 16, measured through the code that serves them, on an embedded
PostgreSQL (a temporary folder, migrated to head) that the script starts and stops itself.

1. The run log's cost: the worker's own `RunExecutor.execute` crawls 2,000 pages of a local
   site (its own process), 10 % of which answer 503 on every attempt (retried 3 times, each
   retry a warning line and the last failure an error line: about 800 lines a run). With the
   log (`RUN_LOG_MAX_LINES` 10,000) the lines go to PostgreSQL as the worker writes them: one
   `INSERT ... SELECT FROM unnest(...)` in each heartbeat's transaction (every second), the
   rest when the run ends. Without it (`RUN_LOG_MAX_LINES` 0) lines are only counted and one
   says so. Items, heartbeats and the run's end are written alike in both.
2. The XLSX export of 100,000 (and 10,000) stored items, streamed by `RunService.export` as
   the HTTP endpoint streams it, each in a child process: peak RSS (C allocations included:
   lxml, zlib) against a child that connects and reads the run but does not export, and peak
   Python memory under tracemalloc in a separate child (tracing costs time and memory of its
   own, so it never shares a process with the RSS figure).

Run: `uv run --frozen python services/scraper-manager/bench/runlog_xlsx.py` (`make bench`
runs it after the crawl benchmark). Every child has a timeout; the script stops by itself.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import resource
import statistics
import sys
import time
import tracemalloc
from typing import Any

import aiohttp
import structlog
from aiohttp import web
from harness import OWNER, child_figures, new_run, runtime_for, settings_for, site_and_database
from scraper_manager.models import Run, RunStatus, Scraper
from scraper_manager.runner import RunExecutor
from scraper_manager.runs.service import RunService
from servicekit.db.engine import create_engine, create_session_factory
from servicekit.net import AddressPolicy, guarded_connector
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

PAGES = 2000
# Rounds of the pair (with, without), after one warm-up pair.
ROUNDS = 15
# The items of the export: three flat fields and a nested one (written as JSON text).
SEED_ITEMS = text(
    """
    INSERT INTO items (run_id, scraper_id, url, data, created_at)
    SELECT :run, :scraper, 'https://shop.example/p/' || n,
           jsonb_build_object('name', 'Item ' || n, 'price', n / 100.0,
                              'tags', CAST('["a", "b"]' AS jsonb)),
           now()
    FROM generate_series(1, :items) AS n
    """
)


# -- the crawled site, in a process of its own (its CPU is not the crawler's) -----------------


def serve_site(port: int) -> None:
    async def handle(request: web.Request) -> web.Response:
        n = int(request.match_info["n"])
        if n % 10 == 5:  # 10 % fail on every attempt; Retry-After 0 so retries do not sleep
            return web.Response(status=503, headers={"Retry-After": "0"})
        links = "".join(f'<a href="/p/{t}">{t}</a>' for t in (n + 1, n + 2, n + 3) if t < PAGES)
        body = f"<html><head><title>Page {n}</title></head><body><h1>{n}</h1>{links}</body></html>"
        return web.Response(text=body, content_type="text/html")

    app = web.Application()
    app.router.add_get("/p/{n}", handle)
    web.run_app(app, host="127.0.0.1", port=port, access_log=None, print=None)


# -- 1. the crawl through the worker, with and without the run log --------------------------


async def written(engine: AsyncEngine, run_id: int) -> tuple[str, int, int]:
    """The run's status and pages as stored, and how many log lines reached PostgreSQL."""
    async with engine.connect() as connection:
        status, pages = (
            await connection.execute(
                text("SELECT status, pages_fetched FROM runs WHERE id = :id"), {"id": run_id}
            )
        ).one()
        lines = await connection.scalar(
            text("SELECT count(*) FROM run_log_lines WHERE run_id = :id"), {"id": run_id}
        )
    return str(status), int(pages), int(lines or 0)


async def crawl_rounds(url: str, start: str) -> dict[str, Any]:
    with_log = settings_for(url, run_log_max_lines=10_000)
    without_log = settings_for(url, run_log_max_lines=0)
    runtime = runtime_for(with_log)
    engine = runtime.engine
    async with runtime.session_factory() as session, session.begin():
        scraper = Scraper(
            owner=OWNER,
            name="bench",
            url=start,
            rate_limit=1_000_000,  # no politeness wait: the crawl's own speed is measured
            max_pages=PAGES,
            obey_robots=False,
            concurrency=8,
        )
        session.add(scraper)
        await session.flush()
        scraper_id = scraper.id
    policy = AddressPolicy.allowing(with_log.allowed_networks)
    times: dict[str, list[float]] = {"without": [], "with": []}
    # This process's CPU seconds too: the crawler's own work (the site and PostgreSQL are
    # other processes).
    cpu: dict[str, list[float]] = {"without": [], "with": []}
    lines: dict[str, int] = {}
    pages = 0
    try:
        async with aiohttp.ClientSession(connector=guarded_connector(policy)) as http:
            executors = {
                "without": RunExecutor(runtime, without_log, http),
                "with": RunExecutor(runtime, with_log, http),
            }
            # One warm-up run of each (connections, caches), then rounds in alternating order.
            for round_ in range(ROUNDS + 1):
                order = ("without", "with") if round_ % 2 else ("with", "without")
                for variant in order:
                    run_id = await new_run(runtime, scraper_id)
                    started, used = time.perf_counter(), time.process_time()
                    await executors[variant].execute(run_id)
                    seconds = time.perf_counter() - started
                    cpu_seconds = time.process_time() - used
                    status, pages, count = await written(engine, run_id)
                    if status != RunStatus.COMPLETED:
                        raise SystemExit(f"bench run {run_id} ended {status}")
                    lines[variant] = count
                    if round_:
                        times[variant].append(seconds)
                        cpu[variant].append(cpu_seconds)
    finally:
        await engine.dispose()
    return {"times": times, "cpu": cpu, "lines": lines, "pages": pages}


# -- 2. the XLSX export, each measure in a child process --------------------------------------


async def seed_export(url: str, items: int) -> tuple[int, int]:
    """A scraper with one completed run of `items` items; their ids."""
    engine = create_engine(settings_for(url))
    try:
        async with create_session_factory(engine)() as session, session.begin():
            scraper = Scraper(owner=OWNER, name="export", url="https://shop.example/")
            session.add(scraper)
            await session.flush()
            run = Run(
                scraper_id=scraper.id,
                owner=OWNER,
                status=RunStatus.COMPLETED,
                items_collected=items,
            )
            session.add(run)
            await session.flush()
            connection = await session.connection()
            await connection.execute(
                SEED_ITEMS, {"run": run.id, "scraper": scraper.id, "items": items}
            )
            return scraper.id, run.id
    finally:
        await engine.dispose()


async def export_child(mode: str, url: str, scraper_id: int, run_id: int) -> dict[str, Any]:
    """In the child: read the run as the endpoint does, then (unless `baseline`) stream its
    XLSX body to nowhere."""
    settings = settings_for(url)
    engine = create_engine(settings)
    factory = create_session_factory(engine)
    size = 0
    started = time.perf_counter()
    try:
        async with factory() as session:
            service = RunService(session, factory)
            run = await service.get(OWNER, scraper_id, run_id)
            if mode != "baseline":
                if mode == "traced":
                    tracemalloc.start()
                export = await service.export(OWNER, scraper_id, run, "xlsx")
                async for chunk in export.body:
                    size += len(chunk)
    finally:
        await engine.dispose()
    traced = tracemalloc.get_traced_memory()[1] if tracemalloc.is_tracing() else 0
    return {
        "seconds": time.perf_counter() - started,
        "bytes": size,
        # Linux: KiB.
        "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "traced_mib": traced / 2**20,
    }


def in_child(mode: str, url: str, scraper_id: int, run_id: int) -> dict[str, Any]:
    return child_figures(__file__, mode, url, str(scraper_id), str(run_id))


# -- the whole bench ---------------------------------------------------------------------------


def main() -> int:
    # The worker's info lines ("run started", "run finished") would bury the figures.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    with site_and_database(__file__, "runlog-bench-") as (url, port):
        crawl = asyncio.run(crawl_rounds(url, f"http://127.0.0.1:{port}/p/0"))
        exports: dict[int, dict[str, dict[str, Any]]] = {}
        baseline: dict[str, Any] = {}
        for items in (10_000, 100_000):
            scraper_id, run_id = asyncio.run(seed_export(url, items))
            if not baseline:
                baseline = in_child("baseline", url, scraper_id, run_id)
            exports[items] = {
                mode: in_child(mode, url, scraper_id, run_id) for mode in ("rss", "traced")
            }
    report(crawl, baseline, exports)
    return 0


def report(
    crawl: dict[str, Any], baseline: dict[str, Any], exports: dict[int, dict[str, dict[str, Any]]]
) -> None:
    times, cpu = crawl["times"], crawl["cpu"]
    load = os.getloadavg()[0]
    print(
        f"\nrun log: the worker's RunExecutor crawls {crawl['pages']} pages (10 % answer 503, "
        f"retried 3 times), {ROUNDS} rounds of both, load average {load:.1f}"
    )
    print(
        f"{'variant':12} | {'median s':>8} | {'fastest s':>9} | {'CPU s':>6} | "
        f"{'log lines in PostgreSQL':>23} | each round (s)"
    )
    print("-" * 92)
    for name, key in (("without log", "without"), ("with log", "with")):
        rounds = " ".join(f"{t:.2f}" for t in times[key])
        print(
            f"{name:12} | {statistics.median(times[key]):>8.3f} | {min(times[key]):>9.3f} | "
            f"{statistics.median(cpu[key]):>6.3f} | {crawl['lines'][key]:>23} | {rounds}"
        )
    # Each round runs the two back to back, so their ratio cancels load that drifts between
    # rounds (other work on a shared machine): the overhead is the median of those ratios.
    # The fastest rounds (least disturbed) are compared too.
    for what, figures in (("wall clock", times), ("CPU", cpu)):
        ratios = [w / o for w, o in zip(figures["with"], figures["without"], strict=True)]
        print(
            f"overhead ({what}): {(statistics.median(ratios) - 1) * 100:+.1f} % median of the "
            f"rounds' with/without, {(min(figures['with']) / min(figures['without']) - 1) * 100:+.1f}"
            " % fastest against fastest (target <= 5 %)"
        )
    print(
        f"\nXLSX export through RunService.export (the endpoint's body), one child process each; "
        f"baseline child (connects, reads the run, no export): peak RSS {baseline['rss_mib']:.1f} MiB"
    )
    print(
        f"{'items':>8} | {'seconds':>7} | {'file MiB':>8} | {'peak RSS MiB':>12} | "
        f"{'RSS over baseline':>17} | {'tracemalloc peak MiB':>20}"
    )
    print("-" * 88)
    for items, measured in exports.items():
        rss, traced = measured["rss"], measured["traced"]
        print(
            f"{items:>8} | {rss['seconds']:>7.1f} | {rss['bytes'] / 2**20:>8.1f} | "
            f"{rss['rss_mib']:>12.1f} | {rss['rss_mib'] - baseline['rss_mib']:>+17.1f} | "
            f"{traced['traced_mib']:>20.1f}"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site", type=int, metavar="PORT", help="(internal) serve the site")
    parser.add_argument("--child", nargs=4, metavar=("MODE", "URL", "SCRAPER", "RUN"))
    args = parser.parse_args()
    if args.site:
        serve_site(args.site)
    elif args.child:
        mode, url, scraper, run = args.child
        print(json.dumps(asyncio.run(export_child(mode, url, int(scraper), int(run)))))
    else:
        sys.exit(main())
