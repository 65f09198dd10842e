"""The run log: what the crawler writes about a run, read over the API."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import aiohttp
import httpx
from aiohttp import web
from scraper_manager.app import create_app
from scraper_manager.crawler.engine import Crawl, CrawlConfig
from scraper_manager.crawler.runlog import LogLine, RunLog, retention_cutoff, without_credentials
from scraper_manager.models import LogLevel
from scraper_manager.runlog.repository import insert_lines
from scraper_manager.runlog.service import prune_run_logs
from scraper_manager.settings import Settings
from servicekit.db.engine import create_session_factory
from servicekit.embedded.network import free_port
from servicekit.testing import serve_app
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine
from structlog.testing import capture_logs

from tests.factories import Client, make_client, make_run, make_scraper
from tests.test_crawls import BASE, slow_crawl_running, start_crawl, wait_for_status
from tests.website import LocalWebsite, serving

FINAL = {"completed", "failed", "stopped"}


async def read_log(
    client: httpx.AsyncClient, who: Client, scraper_id: int, run_id: int, **query: Any
) -> list[dict[str, Any]]:
    answer = await client.get(
        f"{BASE}/{scraper_id}/runs/{run_id}/log",
        params={"limit": 1000, **query},
        headers=who.headers,
    )
    assert answer.status_code == 200, answer.text
    return list(answer.json()["data"])


def messages(lines: list[dict[str, Any]]) -> list[str]:
    return [line["message"] for line in lines]


async def add_lines(engine: AsyncEngine, run_id: int, lines: list[LogLine]) -> None:
    async with engine.begin() as connection:
        await insert_lines(connection, run_id, lines)


def line(message: str, level: LogLevel = LogLevel.INFO, at: datetime | None = None) -> LogLine:
    return LogLine(level, at or datetime.now(UTC), message, {"n": message})


@asynccontextmanager
async def worker_with(settings: Settings, **update: object) -> AsyncIterator[Settings]:
    """The whole worker in this process, as the `worker` fixture runs it, with `update`."""
    from scraper_manager.worker import run as run_worker

    changed = settings.model_copy(
        update={"run_poll_seconds": 0.2, "heartbeat_seconds": 0.2, **update}
    )
    stop = asyncio.Event()
    task = asyncio.create_task(run_worker(changed, stop))
    await asyncio.sleep(0.3)
    try:
        yield changed
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)


async def test_a_run_logs_its_start_robots_refusals_and_end_with_totals(
    worker: Settings, client: httpx.AsyncClient, db_engine: AsyncEngine, website: LocalWebsite
) -> None:
    who = await make_client(db_engine, "write")
    scraper_id, run_id = await start_crawl(
        client, who, url=f"{website.url}/page/0", max_pages=3, rate_limit=50
    )
    await wait_for_status(client, who, scraper_id, run_id, FINAL)
    lines = await read_log(client, who, scraper_id, run_id)
    assert lines[0]["message"] == "run started"
    assert lines[0]["fields"]["max_pages"] == 3
    robots = next(x for x in lines if x["message"] == "robots.txt fetched")
    assert robots["fields"]["url"] == f"{website.url}/robots.txt"
    refused = [x for x in lines if x["message"] == "refused by robots.txt"]
    assert refused
    assert refused[0]["level"] == "warning"
    assert refused[0]["fields"]["url"] == f"{website.url}/private/secret"
    end = lines[-1]
    assert end["message"] == "run ended"
    assert end["fields"]["pages_fetched"] == 3
    assert end["fields"]["status"] == "completed"


async def test_robots_txt_is_logged_with_its_crawl_delay_and_the_delay_applied(
    worker: Settings, client: httpx.AsyncClient, db_engine: AsyncEngine, website: LocalWebsite
) -> None:
    website.robots = "User-agent: *\nCrawl-delay: 0.1\nDisallow: /private\n"
    who = await make_client(db_engine, "write")
    scraper_id, run_id = await start_crawl(
        client, who, url=f"{website.url}/page/0", max_pages=2, rate_limit=50
    )
    await wait_for_status(client, who, scraper_id, run_id, FINAL)
    lines = await read_log(client, who, scraper_id, run_id)
    robots = next(x for x in lines if x["message"] == "robots.txt fetched")
    assert robots["fields"] == {
        "url": f"{website.url}/robots.txt",
        "status": 200,
        "error": None,
        "crawl_delay": 0.1,
        "rules": True,
    }
    # Slower than the scraper's 50 requests/s (0.02 s apart), so it governs the crawl.
    applied = next(x for x in lines if x["message"] == "crawl delay applied")
    assert applied["fields"] == {"seconds": 0.1, "url": f"{website.url}/page/0"}


async def test_robots_txt_without_a_crawl_delay_is_logged_with_none(
    worker: Settings, client: httpx.AsyncClient, db_engine: AsyncEngine, website: LocalWebsite
) -> None:
    who = await make_client(db_engine, "write")
    scraper_id, run_id = await start_crawl(
        client, who, url=f"{website.url}/page/0", max_pages=1, rate_limit=50
    )
    await wait_for_status(client, who, scraper_id, run_id, FINAL)
    lines = await read_log(client, who, scraper_id, run_id)
    robots = next(x for x in lines if x["message"] == "robots.txt fetched")
    assert robots["fields"]["crawl_delay"] is None
    assert "crawl delay applied" not in messages(lines)


async def test_rate_limit_waits_are_one_summary_line_before_the_end(
    worker: Settings, client: httpx.AsyncClient, db_engine: AsyncEngine, website: LocalWebsite
) -> None:
    # One request at a time at 2/s: every page after the first waits for its slot (a local
    # page is fetched in far less than the half second between slots).
    who = await make_client(db_engine, "write")
    scraper_id, run_id = await start_crawl(
        client, who, url=f"{website.url}/page/0", max_pages=4, rate_limit=2, concurrency=1
    )
    await wait_for_status(client, who, scraper_id, run_id, FINAL)
    lines = await read_log(client, who, scraper_id, run_id)
    waits = [x for x in lines if x["message"] == "rate limit waits"]
    assert len(waits) == 1
    summary = waits[0]
    assert summary["level"] == "info"
    assert lines[-2] == summary
    assert set(summary["fields"]) == {"waits", "seconds", "interval_seconds"}
    assert summary["fields"]["interval_seconds"] == 0.5
    assert 1 <= summary["fields"]["waits"] <= 3
    # Each wait is at most one interval (one request at a time).
    assert 0 < summary["fields"]["seconds"] <= 0.5 * summary["fields"]["waits"]


async def test_a_retry_after_is_logged_with_its_status_attempt_and_wait(
    worker: Settings, client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    answers = [web.Response(status=503, headers={"Retry-After": "1"})]

    async def handle(request: web.Request) -> web.Response:
        if answers:
            return answers.pop(0)
        return web.Response(text="<html><title>ok</title></html>", content_type="text/html")

    async with serving(handle) as url:
        who = await make_client(db_engine, "write")
        scraper_id, run_id = await start_crawl(
            client, who, url=url, obey_robots=False, rate_limit=50
        )
        await wait_for_status(client, who, scraper_id, run_id, FINAL)
    warnings = await read_log(client, who, scraper_id, run_id, level="warning")
    retry = next(x for x in warnings if x["message"] == "request failed, retrying")
    assert retry["fields"] == {
        "url": url,
        "status": 503,
        "attempt": 1,
        "wait": 1.0,
        "retry_after": "1",
    }


async def test_a_failing_proxy_is_logged_as_benched_without_its_credentials() -> None:
    log = RunLog(cap=100)
    async with aiohttp.ClientSession() as http:
        crawl = Crawl(
            # Nothing listens on port 9: the proxy fails at once.
            CrawlConfig(
                url="http://127.0.0.1:9/",
                obey_robots=False,
                rate_limit=100,
                max_retries=0,
                proxies=("http://user:secret@127.0.0.1:9",),
            ),
            http,
            user_agent="t",
            on_items=lambda batch: asyncio.sleep(0),
            stop=asyncio.Event(),
            log=log,
        )
        await crawl.run()
    lines = log.take()
    benched = next(x for x in lines if x.message == "proxy benched")
    assert benched.level == LogLevel.WARNING
    assert benched.fields["proxy"] == "http://127.0.0.1:9"
    failed = next(x for x in lines if x.message == "request failed")
    assert failed.level == LogLevel.ERROR
    assert failed.fields["attempts"] == 1


async def test_a_crawl_through_a_failing_proxy_logs_it_benched_without_its_credentials(
    service_settings: Settings, db_engine: AsyncEngine, website: LocalWebsite
) -> None:
    # A port just freed: nothing listens there, so every request through the proxy fails.
    proxy = f"http://crawler:hunter2@127.0.0.1:{free_port()}"
    pooled = service_settings.model_copy(update={"proxy_pools": {"flaky": [proxy]}})
    async with worker_with(pooled), serve_app(create_app(pooled)) as api:
        who = await make_client(db_engine, "write")
        scraper_id, run_id = await start_crawl(
            api, who, url=f"{website.url}/page/0", proxy_pool="flaky", obey_robots=False
        )
        run = await wait_for_status(api, who, scraper_id, run_id, FINAL)
        as_json = await api.get(
            f"{BASE}/{scraper_id}/runs/{run_id}/log", params={"limit": 1000}, headers=who.headers
        )
        as_text = await api.get(f"{BASE}/{scraper_id}/runs/{run_id}/log.txt", headers=who.headers)
    assert run["status"] == "failed"
    lines = as_json.json()["data"]
    benched = [x for x in lines if x["message"] == "proxy benched"]
    # The first attempt and each of the 3 retries fail through it.
    assert len(benched) == 4
    assert benched[0]["level"] == "warning"
    assert benched[0]["fields"] == {
        "proxy": proxy.replace("crawler:hunter2@", ""),
        "seconds": 30.0,
        "others": 0,
    }
    assert lines[0]["fields"]["proxy_pool"] == "flaky"
    for body in (as_json.text, as_text.text):
        assert "proxy benched" in body
        assert "hunter2" not in body
        assert "crawler:" not in body


def test_credentials_are_removed_from_a_logged_proxy_url() -> None:
    assert without_credentials("http://u:p@proxy.example:3128/") == "http://proxy.example:3128/"
    assert without_credentials("http://proxy.example:3128") == "http://proxy.example:3128"


async def test_a_stop_is_logged_as_requested_then_honoured(
    worker: Settings, client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    async with slow_crawl_running(client, db_engine, pages=100, delay=1.0) as (crawl, _):
        await asyncio.sleep(0.5)
        await crawl.stop()
        await crawl.reaches({"stopped"}, timeout=10)
    said = messages(await read_log(client, crawl.who, crawl.scraper_id, crawl.run_id))
    assert said.index("stop requested") < said.index("stop honoured") < said.index("run ended")


async def test_a_crawl_past_the_cap_logs_the_first_lines_then_one_saying_how_many_dropped(
    service_settings: Settings,
    client: httpx.AsyncClient,
    db_engine: AsyncEngine,
    website: LocalWebsite,
) -> None:
    # Every crawl of the site logs at least: run started, robots.txt fetched, the refusal of
    # /private/secret, run ended; a cap of 2 keeps the first two and counts the rest.
    async with worker_with(service_settings, run_log_max_lines=2):
        who = await make_client(db_engine, "write")
        scraper_id, run_id = await start_crawl(
            client, who, url=f"{website.url}/page/0", rate_limit=50
        )
        run = await wait_for_status(client, who, scraper_id, run_id, FINAL)
    assert run["status"] == "completed"
    assert run["stats"]["pages_fetched"] == 12  # the cap bounds the log, not the crawl
    lines = await read_log(client, who, scraper_id, run_id)
    assert messages(lines)[:2] == ["run started", "robots.txt fetched"]
    assert len(lines) == 3
    dropped = lines[-1]
    assert dropped["level"] == "warning"
    assert dropped["fields"]["cap"] == 2
    assert dropped["fields"]["dropped"] >= 2
    assert dropped["message"] == f"{dropped['fields']['dropped']} lines dropped"


def test_past_the_cap_lines_are_counted_and_one_line_says_how_many() -> None:
    log = RunLog(cap=3)
    for n in range(5):
        log.info(f"line {n}")
    log.close()
    lines = log.take()
    assert [x.message for x in lines] == ["line 0", "line 1", "line 2", "2 lines dropped"]
    assert lines[-1].fields == {"dropped": 2, "cap": 3}


def test_a_log_within_its_cap_has_no_dropped_line() -> None:
    log = RunLog(cap=3)
    log.info("only")
    log.close()
    assert [x.message for x in log.take()] == ["only"]


async def test_the_log_pages_by_keyset_and_filters_by_least_level(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "read")
    run = await make_run(db_engine, await make_scraper(db_engine, who.owner))
    await add_lines(
        db_engine,
        run.id,
        [
            line("a"),
            line("b", LogLevel.WARNING),
            line("c", LogLevel.ERROR),
            line("d"),
            line("e", LogLevel.WARNING),
        ],
    )
    path = f"{BASE}/{run.scraper_id}/runs/{run.id}/log"
    first = (await client.get(path, params={"limit": 2}, headers=who.headers)).json()
    assert messages(first["data"]) == ["a", "b"]
    rest = (
        await client.get(
            path, params={"limit": 10, "after": first["next_cursor"]}, headers=who.headers
        )
    ).json()
    assert messages(rest["data"]) == ["c", "d", "e"]
    assert rest["next_cursor"] is None
    warned = await read_log(client, who, run.scraper_id, run.id, level="warning")
    assert messages(warned) == ["b", "c", "e"]
    errors = await read_log(client, who, run.scraper_id, run.id, level="error")
    assert messages(errors) == ["c"]


async def test_a_cursor_the_api_did_not_issue_is_400(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "read")
    run = await make_run(db_engine, await make_scraper(db_engine, who.owner))
    answer = await client.get(
        f"{BASE}/{run.scraper_id}/runs/{run.id}/log?after=abc", headers=who.headers
    )
    assert answer.status_code == 400


async def test_the_text_log_has_one_line_each_with_level_and_fields(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "read")
    run = await make_run(db_engine, await make_scraper(db_engine, who.owner))
    at = datetime(2026, 11, 22, 10, 0, 1, tzinfo=UTC)
    await add_lines(
        db_engine,
        run.id,
        [
            LogLine(LogLevel.INFO, at, "run started", {"url": "http://x.example/"}),
            LogLine(LogLevel.ERROR, at, "request failed", {"status": 500}),
        ],
    )
    answer = await client.get(f"{BASE}/{run.scraper_id}/runs/{run.id}/log.txt", headers=who.headers)
    assert answer.headers["content-type"].startswith("text/plain")
    assert answer.text.splitlines() == [
        '2026-11-22T10:00:01.000Z INFO    run started url="http://x.example/"',
        "2026-11-22T10:00:01.000Z ERROR   request failed status=500",
    ]


async def test_another_owners_run_log_is_404_in_both_forms(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    owner = await make_client(db_engine, "read")
    stranger = await make_client(db_engine, "admin")
    run = await make_run(db_engine, await make_scraper(db_engine, owner.owner))
    await add_lines(db_engine, run.id, [line("private")])
    for tail in ("log", "log.txt"):
        path = f"{BASE}/{run.scraper_id}/runs/{run.id}/{tail}"
        answer = await client.get(path, headers=stranger.headers)
        assert answer.status_code == 404
        assert "private" not in answer.text


async def test_retention_prunes_lines_older_than_the_setting_by_the_given_clock(
    db_engine: AsyncEngine,
) -> None:
    who = await make_client(db_engine, "read")
    run = await make_run(db_engine, await make_scraper(db_engine, who.owner))
    now = datetime(2030, 1, 31, 12, 0, tzinfo=UTC)
    await add_lines(
        db_engine,
        run.id,
        [
            line("expired", at=now - timedelta(days=30, seconds=1)),
            line("kept", at=now - timedelta(days=29, hours=23)),
        ],
    )
    pruned = await prune_run_logs(create_session_factory(db_engine), now=now, retention_days=30)
    assert pruned >= 1
    async with db_engine.connect() as connection:
        left = (
            await connection.execute(
                text("SELECT message FROM run_log_lines WHERE run_id = :r"), {"r": run.id}
            )
        ).scalars()
        assert list(left) == ["kept"]


def test_the_retention_cutoff_is_now_minus_the_retention_days() -> None:
    now = datetime(2030, 1, 31, tzinfo=UTC)
    assert retention_cutoff(now, 30) == datetime(2030, 1, 1, tzinfo=UTC)


class Unprintable:
    """A field value that cannot be written out: its `str` raises."""

    def __str__(self) -> str:
        raise RuntimeError("no text for this value")


async def test_a_line_that_cannot_be_stored_is_replaced_by_an_error_line_and_the_rest_are_kept(
    db_engine: AsyncEngine,
) -> None:
    owner = f"owner-{uuid.uuid4().hex[:8]}"
    scraper = await make_scraper(db_engine, owner)
    run = await make_run(db_engine, scraper)
    now = datetime.now(UTC)
    lines = [
        LogLine(LogLevel.INFO, now, "first", {"n": 1}),
        # Written as `NaN`, which PostgreSQL's jsonb refuses.
        LogLine(LogLevel.INFO, now, "not a number", {"rate": float("nan")}),
        LogLine(LogLevel.INFO, now, "unprintable", {"value": Unprintable()}),
        LogLine(LogLevel.INFO, now, "last", {"n": 2}),
    ]
    with capture_logs() as logged:
        await add_lines(db_engine, run.id, lines)
    async with db_engine.connect() as conn:
        stored = (
            await conn.execute(
                text(
                    "SELECT level, message, fields FROM run_log_lines WHERE run_id = :r ORDER BY id"
                ),
                {"r": run.id},
            )
        ).all()
    assert [(row.level, row.message) for row in stored] == [
        ("info", "first"),
        ("error", "a log line could not be stored"),
        ("error", "a log line could not be stored"),
        ("info", "last"),
    ]
    assert [row.fields["message"] for row in stored[1:3]] == ["not a number", "unprintable"]
    errors = [entry for entry in logged if entry["log_level"] == "error"]
    assert [(e["loop"], e["run_id"], e["line"]) for e in errors] == [
        ("run-log writer", run.id, "unprintable"),
        ("run-log writer", run.id, "not a number"),
    ]
