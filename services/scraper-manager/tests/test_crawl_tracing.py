"""A crawl as operators see it in a trace: one span per run, a sampled few fetch spans, failed
requests as events; and what the worker logs about it."""

from __future__ import annotations

import asyncio
import re
import socket
import time
from collections.abc import MutableMapping
from typing import Any

import aiohttp
import httpx
import pytest
from scraper_manager.crawler.engine import FETCH_SPAN_EVERY, Crawl, CrawlConfig
from scraper_manager.settings import Settings
from servicekit.testing.tracing import RecordedSpans
from servicekit.tracing import tracer
from sqlalchemy.ext.asyncio import AsyncEngine
from structlog.testing import capture_logs

from tests.factories import make_client
from tests.test_crawls import start_crawl, wait_for_status
from tests.website import LocalWebsite

FINAL = {"completed", "failed", "stopped"}


async def crawl_site(site: LocalWebsite, max_pages: int) -> None:
    async with aiohttp.ClientSession() as http:
        crawl = Crawl(
            CrawlConfig(
                url=f"{site.url}/page/0",
                obey_robots=False,
                rate_limit=10_000,
                max_pages=max_pages,
                max_retries=0,
                concurrency=4,
            ),
            http,
            user_agent="t",
            on_items=lambda batch: asyncio.sleep(0),
            stop=asyncio.Event(),
        )
        with tracer.start_as_current_span("crawl run"):
            await crawl.run()


async def finished_run(
    client: httpx.AsyncClient, db_engine: AsyncEngine, website: LocalWebsite, max_pages: int
) -> int:
    """A run of the in-process worker, started over the API and waited for; its id."""
    who = await make_client(db_engine, "write")
    scraper_id, run_id = await start_crawl(
        client, who, url=f"{website.url}/page/0", max_pages=max_pages, rate_limit=50
    )
    await wait_for_status(client, who, scraper_id, run_id, FINAL)
    return run_id


async def test_a_run_is_one_span_with_its_totals_and_the_first_fetch_as_a_child(
    spans: RecordedSpans,
    worker: Settings,
    client: httpx.AsyncClient,
    db_engine: AsyncEngine,
    website: LocalWebsite,
) -> None:
    run_id = await finished_run(client, db_engine, website, max_pages=3)

    run = spans.named("crawl run")
    assert run.parent is None
    assert run.attributes is not None
    assert run.attributes["crawler.run.id"] == run_id
    assert run.attributes["crawler.run.status"] == "completed"
    assert run.attributes["crawler.pages_fetched"] == 3
    fetch = spans.named("crawl fetch")
    assert fetch.parent is not None
    assert fetch.parent.span_id == run.context.span_id
    assert fetch.attributes is not None
    assert fetch.attributes["url.full"] == f"{website.url}/page/0"


async def test_fetch_spans_are_sampled_not_one_per_page(spans: RecordedSpans) -> None:
    site = LocalWebsite(pages=2 * FETCH_SPAN_EVERY + 10)
    await site.start()
    try:
        await crawl_site(site, max_pages=2 * FETCH_SPAN_EVERY + 5)
    finally:
        await site.stop()

    fetches = [span for span in spans.finished if span.name == "crawl fetch"]
    assert sorted(int(s.attributes["crawler.fetch.sequence"]) for s in fetches if s.attributes) == [  # type: ignore[arg-type]
        1,
        FETCH_SPAN_EVERY,
        2 * FETCH_SPAN_EVERY,
    ]


async def test_a_failed_request_is_an_event_on_the_run_span(spans: RecordedSpans) -> None:
    site = LocalWebsite(pages=6, fail_every=3)
    await site.start()
    try:
        await crawl_site(site, max_pages=6)
    finally:
        await site.stop()

    run = spans.named("crawl run")
    failures = [event for event in run.events if event.name == "request failed"]
    assert failures
    assert failures[0].attributes is not None
    assert failures[0].attributes["status"] == 500
    assert str(failures[0].attributes["url.full"]).startswith(f"{site.url}/page/3")


async def test_the_worker_logs_each_run_start_and_end_with_its_id(
    capsys: pytest.CaptureFixture[str],
    worker: Settings,
    client: httpx.AsyncClient,
    db_engine: AsyncEngine,
    website: LocalWebsite,
) -> None:
    run_id = await finished_run(client, db_engine, website, max_pages=2)
    await asyncio.sleep(0.2)  # the finish is logged just after the status is written

    # The console renderer's colours, off: the words are what is asserted.
    err = re.sub(r"\x1b\[[0-9;]*m", "", capsys.readouterr().err)
    started = [line for line in err.splitlines() if "run started" in line]
    finished = [line for line in err.splitlines() if "run finished" in line]
    assert any(f"run_id={run_id}" in line or f'"run_id": {run_id}' in line for line in started)
    assert any(
        (f"run_id={run_id}" in line or f'"run_id": {run_id}' in line) and "completed" in line
        for line in finished
    )


def closed_port() -> int:
    """A loopback port nothing listens on: connecting to it is refused."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


async def logged(lines: list[MutableMapping[str, Any]], event: str, run_id: int) -> None:
    """Until the worker has logged `event` for the run (just after it writes the status)."""
    deadline = time.monotonic() + 10
    while not any(line["event"] == event and line.get("run_id") == run_id for line in lines):
        assert time.monotonic() < deadline, f"no {event!r} line for run {run_id}: {lines}"
        await asyncio.sleep(0.05)


async def test_a_failed_run_is_one_warning_line_with_its_run_id_and_reason(
    worker: Settings, client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    url = f"http://127.0.0.1:{closed_port()}/"
    who = await make_client(db_engine, "write")
    with capture_logs() as lines:
        scraper_id, run_id = await start_crawl(client, who, url=url, obey_robots=False)
        run = await wait_for_status(client, who, scraper_id, run_id, FINAL)
        await logged(lines, "run finished", run_id)

    assert run["status"] == "failed"
    [warning] = [line for line in lines if line["log_level"] == "warning"]
    assert warning["event"] == "run finished"
    assert warning["run_id"] == run_id
    assert warning["status"] == "failed"
    assert warning["last_error"].startswith(f"{url}: ClientConnectorError: ")
    assert warning["last_error"] == run["last_error"]
