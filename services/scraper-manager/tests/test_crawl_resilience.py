"""Stops over NATS, a killed worker's run, proxy rotation, retries with Retry-After."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import httpx
from aiohttp import web
from scraper_manager.crawler.engine import Collected, Crawl, CrawlConfig, ProxyRotation
from scraper_manager.settings import Settings
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.factories import make_client
from tests.test_crawls import BASE, slow_crawl_running, start_crawl, wait_for_status
from tests.website import LocalWebsite, serving


async def test_the_nats_signal_stops_a_run_before_any_heartbeat(
    service_settings: Settings, client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    from scraper_manager.worker import run as run_worker

    settings = service_settings.model_copy(
        update={"run_poll_seconds": 0.2, "heartbeat_seconds": 30.0, "run_lease_seconds": 120.0}
    )
    stop_worker = asyncio.Event()
    worker = asyncio.create_task(run_worker(settings, stop_worker))
    try:
        async with slow_crawl_running(client, db_engine, pages=100, delay=1.0) as (crawl, _):
            await asyncio.sleep(0.5)
            asked = time.monotonic()
            await crawl.stop()
            await crawl.reaches({"stopped"}, timeout=10)
            assert time.monotonic() - asked < 5.0
    finally:
        stop_worker.set()
        await asyncio.wait_for(worker, 30)


async def test_a_worker_killed_during_a_run_leaves_it_failed_with_a_reason(
    service_settings: Settings, client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    from scraper_manager.worker import run as run_worker

    slow = LocalWebsite(pages=100, delay=0.5)
    await slow.start()
    env = {
        **os.environ,
        "SCRAPER_MANAGER_DATABASE_URL": service_settings.database_url,
        "SCRAPER_MANAGER_NATS_URL": service_settings.nats_url,
        "SCRAPER_MANAGER_RUN_POLL_SECONDS": "0.2",
        "SCRAPER_MANAGER_LOG_LEVEL": "WARNING",
        "SCRAPER_MANAGER_ALLOWED_NETWORKS": json.dumps(service_settings.allowed_networks),
    }
    # Only this worker process runs until it is killed, so it is the one crawling the run.
    doomed = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).parent / "scraper-manager"),
        "worker",
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    survivor_stop = asyncio.Event()
    survivor: asyncio.Task[None] | None = None
    try:
        who = await make_client(db_engine, "write")
        scraper_id, run_id = await start_crawl(
            client, who, url=f"{slow.url}/page/0", rate_limit=50, concurrency=1, max_pages=100
        )
        # The worker process starts first: on a loaded machine that took more than 30 s.
        await wait_for_status(client, who, scraper_id, run_id, {"running"}, timeout=60)
        doomed.send_signal(signal.SIGKILL)
        await doomed.wait()
        # Another worker, with a short lease, notices the silence.
        settings = service_settings.model_copy(
            update={"run_poll_seconds": 0.2, "run_lease_seconds": 2.0}
        )
        survivor = asyncio.create_task(run_worker(settings, survivor_stop))
        failed = await wait_for_status(client, who, scraper_id, run_id, {"failed"}, timeout=30)
        assert failed["last_error"].startswith("worker lost")
    finally:
        if doomed.returncode is None:
            doomed.kill()
            await doomed.wait()
        survivor_stop.set()
        if survivor is not None:
            await asyncio.wait_for(survivor, 30)
        await slow.stop()


def test_proxies_rotate_and_a_failing_one_cools_down() -> None:
    rotation = ProxyRotation(("http://p1:8080", "http://p2:8080", "http://p3:8080"))
    assert [rotation.take() for _ in range(4)] == [
        "http://p1:8080",
        "http://p2:8080",
        "http://p3:8080",
        "http://p1:8080",
    ]
    rotation.failed("http://p2:8080")
    assert [rotation.take() for _ in range(4)] == [
        "http://p3:8080",
        "http://p1:8080",
        "http://p3:8080",
        "http://p1:8080",
    ]
    assert ProxyRotation(()).take() is None


async def test_429_and_5xx_are_retried_honouring_retry_after() -> None:
    answers = [web.Response(status=503, headers={"Retry-After": "1"}), web.Response(status=429)]
    seen: list[float] = []

    async def handle(request: web.Request) -> web.Response:
        seen.append(time.monotonic())
        if answers:
            return answers.pop(0)
        return web.Response(text="<html><title>ok</title></html>", content_type="text/html")

    items: list[dict[str, object]] = []

    async def sink(batch: list[Collected]) -> None:
        items.extend(entry[1] for entry in batch if isinstance(entry, tuple))

    async with serving(handle) as url, aiohttp.ClientSession() as http:
        crawl = Crawl(
            CrawlConfig(url=url, rate_limit=100, obey_robots=False),
            http,
            user_agent="t",
            on_items=sink,
            stop=asyncio.Event(),
        )
        stats = await crawl.run()
    assert stats.retries == 2
    assert stats.status_counts == {"503": 1, "429": 1, "200": 1}
    assert seen[1] - seen[0] >= 0.95  # waited as Retry-After asked
    assert items[0]["title"] == "ok"


async def test_a_run_whose_queue_message_was_lost_is_enqueued_again(
    worker: Settings, client: httpx.AsyncClient, db_engine: AsyncEngine, website: LocalWebsite
) -> None:
    from sqlalchemy import text

    who = await make_client(db_engine, "write")
    scraper = (
        await client.post(
            BASE,
            json={"name": "s", "url": f"{website.url}/page/0", "max_pages": 2, "rate_limit": 50},
            headers=who.headers,
        )
    ).json()
    # A pending run with no message on the queue, as if NATS had been down at that moment.
    async with db_engine.begin() as conn:
        run_id = await conn.scalar(
            text(
                "INSERT INTO runs (scraper_id, owner, status, trigger, created_at, items_collected,"
                " pages_fetched, requests_failed, retries, bytes_received, status_counts,"
                " stop_requested) VALUES (:s, :o, 'pending', 'manual', now() - interval '1 minute',"
                " 0, 0, 0, 0, 0, '{}', false) RETURNING id"
            ),
            {"s": scraper["id"], "o": who.owner},
        )
    run = await wait_for_status(client, who, scraper["id"], run_id, {"completed"}, timeout=30)
    assert run["stats"]["pages_fetched"] == 2
