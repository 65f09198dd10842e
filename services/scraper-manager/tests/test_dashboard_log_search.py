"""Search inside a run's log on its page: lines with a part of their message or of a field's
value, any case, with the least level; a live page streams only such lines."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import httpx
from scraper_manager.models import LogLevel, Run, RunLogLine, RunStatus
from servicekit.db.engine import create_session_factory
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.dashboard import DASH, sign_in
from tests.factories import make_client, make_run, make_scraper

LINES: list[tuple[LogLevel, str, dict[str, Any]]] = [
    (LogLevel.INFO, "run started", {"url": "http://127.0.0.1:9/start"}),
    (LogLevel.WARNING, "request failed, retrying", {"url": "http://127.0.0.1:9/p/25"}),
    (LogLevel.INFO, "robots.txt read", {"crawl_delay": None}),
    (LogLevel.ERROR, "request failed", {"url": "http://127.0.0.1:9/p/25", "status": 500}),
    (LogLevel.INFO, "run ended", {"note": "100% done"}),
]


def messages(html: str) -> list[str]:
    return re.findall(r"<strong>\w+</strong> ([^<]+?)(?: <span|</li>)", html)


async def a_run_with_a_log(
    db_engine: AsyncEngine, owner: str, status: RunStatus
) -> tuple[int, int]:
    scraper = await make_scraper(db_engine, owner)
    run = await make_run(db_engine, scraper, status=status)
    async with create_session_factory(db_engine)() as session, session.begin():
        session.add_all(
            RunLogLine(
                run_id=run.id, level=level, at=datetime.now(UTC), message=text, fields=fields
            )
            for level, text, fields in LINES
        )
    return scraper.id, run.id


async def test_the_run_page_shows_the_log_lines_with_the_text_searched_for(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "read")
    scraper_id, run_id = await a_run_with_a_log(db_engine, who.owner, RunStatus.COMPLETED)
    await sign_in(client, who)
    base = f"{DASH}/scrapers/{scraper_id}/runs/{run_id}"
    found = (await client.get(base, params={"q": "FAILED"})).text
    assert messages(found) == ["request failed, retrying", "request failed"]
    assert 'value="FAILED"' in found  # kept in its field
    # A field's value too, with the least level; % is itself.
    by_field = (await client.get(base, params={"q": "p/25", "level": "error"})).text
    assert messages(by_field) == ["request failed"]
    assert messages((await client.get(base, params={"q": "0%"})).text) == ["run ended"]
    # The form's "all" levels sends `level=`: no filter, not a 422.
    every = await client.get(base, params={"level": "", "q": "run "})
    assert every.status_code == 200
    assert messages(every.text) == ["run started", "run ended"]
    none = (await client.get(base, params={"q": "nothing like it"})).text
    assert "No log lines with “nothing like it”." in none


async def test_a_live_run_page_streams_only_the_lines_searched_for(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "read")
    scraper_id, run_id = await a_run_with_a_log(db_engine, who.owner, RunStatus.RUNNING)
    await sign_in(client, who)
    base = f"{DASH}/scrapers/{scraper_id}/runs/{run_id}"
    page = (await client.get(base, params={"q": "retrying"})).text
    assert f'sse-connect="{base}/live?after=' in page
    assert "&amp;q=retrying" in page
    # The run ended meanwhile: the stream's one look carries the lines after 0, searched.
    async with create_session_factory(db_engine)() as session, session.begin():
        stored = await session.get(Run, run_id)
        assert stored is not None
        stored.status = RunStatus.COMPLETED
        session.add(stored)
    stream = await client.get(f"{base}/live", params={"after": 0, "q": "retrying"})
    log_events = [part for part in stream.text.split("\n\n") if part.startswith("event: log")]
    assert len(log_events) == 1
    assert "request failed, retrying" in log_events[0]
    assert "run started" not in log_events[0]
