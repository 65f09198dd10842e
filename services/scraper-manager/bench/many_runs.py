"""Issue 33's scale figures, measured at the sites (their own clocks and counts):

1. **500 concurrent runs on one worker**: `scraper-manager worker` (one process, as deployed)
   crawls 500 runs at `rate_limit` 2 each against a local site; each run reads its own
   endless chain of pages (`/r<run>/<n>`). The site counts every run's requests in a window
   of `--window` seconds once all have started; then 10 runs against a second site that
   answers after 5 s are started and a second window is counted. Printed: the slowest and
   fastest run's rate in each window (target: every run within ±10 % of 2/s), the worker's
   peak RSS (≤ 1 GiB), and whether the slow site changed the others' rates. met/MISSED.
2. **5 scrapers on one host with a 10 req/s site budget** (`HOST_BUDGET_PER_SECOND` 10): the
   same worker, 5 runs at `rate_limit` 20 each (100 req/s between them without the budget)
   against one site, which records every request: the most requests it saw within any
   second. met/MISSED.

Run: `uv run --frozen python services/scraper-manager/bench/many_runs.py` (`make bench` runs
it). It starts an embedded PostgreSQL and nats-server of its own; bounded to about 3 min.
The worker's warnings go to `$TMPDIR/many-runs-worker-<pid>.log`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import nats
from aiohttp import web
from scraper_manager.cli import MIGRATIONS
from scraper_manager.crawler.queue import RUNS_SUBJECT, ensure_runs_stream
from scraper_manager.models import Run, RunStatus, Scraper
from servicekit.db.admin import database_url_for, ensure_database
from servicekit.db.migrations import upgrade
from servicekit.embedded.nats import EmbeddedNats
from servicekit.embedded.network import free_port, wait_for_port
from servicekit.embedded.postgres import EmbeddedPostgres
from sqlalchemy import create_engine, text
from sqlalchemy.orm import Session

OWNER = "bench"
RUNS = 500
RATE = 2.0
SLOW_RUNS = 10
SLOW_SECONDS = 5.0
BUDGET = 10
BUDGET_RUNS = 5
RSS_LIMIT_MIB = 1024


def serve_site(port: int, delay: float) -> None:
    """Endless page chains per run; `/counts?since=&until=` answers each run's requests in
    that window of this process's monotonic clock, `/now` the clock, `/times` every request's
    time."""
    times: list[tuple[float, str]] = []

    async def page(request: web.Request) -> web.Response:
        times.append((time.monotonic(), request.match_info["run"]))
        if delay:
            await asyncio.sleep(delay)
        n = int(request.match_info["n"])
        run = request.match_info["run"]
        return web.Response(
            text=f'<html><title>{n}</title><a href="/{run}/{n + 1}">next</a></html>',
            content_type="text/html",
        )

    async def counts(request: web.Request) -> web.Response:
        since, until = float(request.query["since"]), float(request.query["until"])
        found = Counter(run for at, run in times if since <= at < until)
        return web.json_response(dict(found))

    async def now(request: web.Request) -> web.Response:
        return web.json_response(time.monotonic())

    async def all_times(request: web.Request) -> web.Response:
        return web.json_response([at for at, _ in times])

    app = web.Application()
    app.router.add_get("/now", now)
    app.router.add_get("/counts", counts)
    app.router.add_get("/times", all_times)
    app.router.add_get("/{run}/{n}", page)
    web.run_app(app, host="127.0.0.1", port=port, access_log=None, print=None)


def create_runs(db: str, urls: list[str], rate: float, concurrency: int) -> list[int]:
    """Scrapers and their pending runs, in one transaction."""
    engine = create_engine(db.replace("postgresql://", "postgresql+psycopg://", 1))
    with Session(engine) as session, session.begin():
        runs = []
        for url in urls:
            scraper = Scraper(
                owner=OWNER,
                name=url,
                url=url,
                rate_limit=int(rate),
                max_pages=10_000,
                obey_robots=False,
                concurrency=concurrency,
                revalidate=False,
            )
            session.add(scraper)
            session.flush()
            run = Run(scraper_id=scraper.id, owner=OWNER, status=RunStatus.PENDING)
            session.add(run)
            runs.append(run)
        session.flush()
        ids = [run.id for run in runs]
    engine.dispose()
    return ids


async def enqueue(nats_url: str, run_ids: list[int]) -> None:
    client = await nats.connect(nats_url)
    js = client.jetstream()
    await ensure_runs_stream(js)
    for run_id in run_ids:
        await js.publish(RUNS_SUBJECT, json.dumps({"run_id": run_id}).encode())
    await client.close()


def running(db: str, run_ids: list[int]) -> int:
    engine = create_engine(db.replace("postgresql://", "postgresql+psycopg://", 1))
    with engine.connect() as connection:
        found = connection.scalar(
            text("SELECT count(*) FROM runs WHERE id = ANY(:ids) AND status = 'running'"),
            {"ids": run_ids},
        )
    engine.dispose()
    return int(found or 0)


def stop_all(db: str) -> None:
    engine = create_engine(db.replace("postgresql://", "postgresql+psycopg://", 1))
    with engine.begin() as connection:
        connection.execute(text("UPDATE runs SET stop_requested = true WHERE status = 'running'"))
    engine.dispose()


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def start_site(delay: float) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, __file__, "--site", str(port), str(delay)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_for_port("127.0.0.1", port, 30)
    return process, f"http://127.0.0.1:{port}"


def start_worker(db: str, nats_url: str, **settings: Any) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCRAPER_MANAGER_")}
    env.update(
        {
            "SCRAPER_MANAGER_DATABASE_URL": db,
            "SCRAPER_MANAGER_NATS_URL": nats_url,
            "SCRAPER_MANAGER_ALLOWED_NETWORKS": '["127.0.0.0/8"]',
            "SCRAPER_MANAGER_LOG_LEVEL": "WARNING",
            "SCRAPER_MANAGER_LOG_JSON": "false",
        }
    )
    env.update({f"SCRAPER_MANAGER_{k.upper()}": str(v) for k, v in settings.items()})
    executable = str(Path(sys.executable).parent / "scraper-manager")
    log = open(Path(tempfile.gettempdir()) / f"many-runs-worker-{os.getpid()}.log", "ab")  # noqa: SIM115
    return subprocess.Popen([executable, "worker"], env=env, stdout=subprocess.DEVNULL, stderr=log)


def wait_running(db: str, run_ids: list[int], timeout: float) -> float:
    started = time.monotonic()
    while running(db, run_ids) < len(run_ids):
        if time.monotonic() - started > timeout:
            print(f"only {running(db, run_ids)} of {len(run_ids)} runs started", flush=True)
            break
        time.sleep(0.5)
    return time.monotonic() - started


def window(site: str, seconds: float) -> tuple[dict[str, int], float]:
    since = float(httpx.get(f"{site}/now").json())
    time.sleep(seconds)
    until = since + seconds
    return dict(httpx.get(f"{site}/counts", params={"since": since, "until": until}).json()), until


def rates(counts: dict[str, int], runs: int, seconds: float) -> list[float]:
    return [counts.get(f"r{i}", 0) / seconds for i in range(runs)]


def scale(db: str, nats_url: str, seconds: float) -> dict[str, Any]:
    fast, fast_url = start_site(0.0)
    slow, slow_url = start_site(SLOW_SECONDS)
    worker = start_worker(db, nats_url, runs_per_worker=RUNS + SLOW_RUNS)
    try:
        ids = create_runs(db, [f"{fast_url}/r{i}/0" for i in range(RUNS)], RATE, 2)
        asyncio.run(enqueue(nats_url, ids))
        ramp = wait_running(db, ids, 120)
        time.sleep(15)  # every run past its start (the last ones are claimed after the first)
        before, _ = window(fast_url, seconds)
        found = rates(before, RUNS, seconds)
        print(f"alone: slowest {min(found):.2f}/s, fastest {max(found):.2f}/s", flush=True)
        slow_ids = create_runs(db, [f"{slow_url}/r{i}/0" for i in range(SLOW_RUNS)], RATE, 4)
        asyncio.run(enqueue(nats_url, slow_ids))
        wait_running(db, slow_ids, 60)
        time.sleep(SLOW_SECONDS + 1)  # the slow site holds requests now
        after, _ = window(fast_url, seconds)
        slow_counted = len(httpx.get(f"{slow_url}/times").json())
        rss = peak_rss_mib(worker.pid)
        stop_all(db)
    finally:
        worker.terminate()
        worker.wait(60)
        fast.terminate()
        slow.terminate()
    return {
        "ramp": ramp,
        "before": rates(before, RUNS, seconds),
        "after": rates(after, RUNS, seconds),
        "rss": rss,
        "slow_counted": slow_counted,
    }


def budget(db: str, nats_url: str, seconds: float) -> dict[str, Any]:
    site, url = start_site(0.0)
    worker = start_worker(db, nats_url, runs_per_worker=BUDGET_RUNS, host_budget_per_second=BUDGET)
    try:
        ids = create_runs(db, [f"{url}/b{i}/0" for i in range(BUDGET_RUNS)], 20.0, 4)
        asyncio.run(enqueue(nats_url, ids))
        wait_running(db, ids, 60)
        time.sleep(seconds)
        stop_all(db)
        times = sorted(httpx.get(f"{url}/times").json())
    finally:
        worker.terminate()
        worker.wait(60)
        site.terminate()
    per_second = Counter(int(t - times[0]) for t in times)
    sliding = max(sum(1 for t in times[i:] if t < start + 1.0) for i, start in enumerate(times))
    return {
        "requests": len(times),
        "seconds": times[-1] - times[0],
        "most_in_a_calendar_second": max(per_second.values()),
        "most_in_any_second": sliding,
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--site", nargs=2)
    parser.add_argument("--window", type=float, default=20.0)
    args = parser.parse_args()
    if args.site:
        serve_site(int(args.site[0]), float(args.site[1]))
        return 0
    with tempfile.TemporaryDirectory(prefix="many-runs-bench-") as workdir:
        postgres = EmbeddedPostgres(Path(workdir) / "pg")
        broker = EmbeddedNats(Path(workdir) / "nats")
        postgres.start()
        broker.start()
        try:
            db = database_url_for(postgres.url, "scraper_manager_scale_bench")
            ensure_database(db)
            upgrade(MIGRATIONS, db)
            budgeted = budget(db, broker.url, args.window)
            scaled = scale(db, broker.url, args.window)
        finally:
            broker.stop()
            postgres.stop()

    def verdict(ok: bool) -> str:
        return "met" if ok else "MISSED"

    print(f"\n{BUDGET_RUNS} scrapers at 20 req/s each on one host, HOST_BUDGET_PER_SECOND {BUDGET}")
    print(
        f"  the host saw {budgeted['requests']} requests in {budgeted['seconds']:.1f} s; at most "
        f"{budgeted['most_in_a_calendar_second']} in a calendar second, "
        f"{budgeted['most_in_any_second']} in any 1-s window: strictly "
        f"{verdict(budgeted['most_in_any_second'] <= BUDGET)}, within the tolerance of one "
        f"(a slot's jitter on its way to the host) "
        f"{verdict(budgeted['most_in_any_second'] <= BUDGET + 1)}"
    )
    print(
        f"\n{RUNS} concurrent runs at {RATE:g} req/s on one worker (started in {scaled['ramp']:.1f} s)"
    )
    low, high = RATE * 0.9, RATE * 1.1
    for name, found in (
        ("alone", scaled["before"]),
        (f"with {SLOW_RUNS} runs on a {SLOW_SECONDS:g}-s site", scaled["after"]),
    ):
        inside = sum(1 for r in found if low <= r <= high)
        print(
            f"  {name:28}: slowest {min(found):.2f}/s, fastest {max(found):.2f}/s, mean "
            f"{sum(found) / len(found):.3f}/s, {inside}/{len(found)} within ±10 %: "
            f"{verdict(inside == len(found))}"
        )
    mean_before = sum(scaled["before"]) / RUNS
    mean_after = sum(scaled["after"]) / RUNS
    unchanged = abs(mean_after - mean_before) <= 0.1 * RATE * 0.5 and min(scaled["after"]) >= low
    print(
        f"  the slow site's requests counted: {scaled['slow_counted']}; others' mean moved "
        f"{mean_after - mean_before:+.3f}/s: {verdict(unchanged)}"
    )
    print(
        f"  worker peak RSS {scaled['rss']:.0f} MiB (<= {RSS_LIMIT_MIB}): "
        f"{verdict(scaled['rss'] <= RSS_LIMIT_MIB)}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
