"""The live run page under load, over real HTTP (uvicorn on 127.0.0.1): capped per session
(429 past it, the slot back when the browser goes), and what the worker's heartbeat writes
reaching every open page of the run through one shared look."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import UTC, datetime

from scraper_manager.app import create_app
from scraper_manager.crawler.runlog import LogLine
from scraper_manager.models import LogLevel, RunStatus
from scraper_manager.runlog.repository import insert_lines
from scraper_manager.runs.live import LIVE_SUBJECT
from scraper_manager.settings import Settings
from servicekit.testing.live import live_server, until_open_streams
from servicekit.testing.sse import open_feed
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.dashboard import DASH, sign_in
from tests.factories import make_client, make_run, make_scraper


async def test_past_the_session_cap_a_live_run_page_is_429_and_a_closed_one_frees_its_slot(
    service_settings: Settings, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "read")
    run = await make_run(
        db_engine, await make_scraper(db_engine, who.owner), status=RunStatus.RUNNING
    )
    live = f"{DASH}/scrapers/{run.scraper_id}/runs/{run.id}/live"
    settings = service_settings.model_copy(update={"live_streams_per_session": 1})
    async with live_server(create_app(settings)) as server, server.client() as client:
        await sign_in(client, who)
        async with contextlib.AsyncExitStack() as first:
            kept = [await open_feed(first, client, live)]
            refused = await client.get(live)
            assert refused.status_code == 429
            assert "1 live views open" in refused.text
        await until_open_streams(server.hub, 0)
        async with contextlib.AsyncExitStack() as again:
            kept.append(await open_feed(again, client, live))
            assert server.hub.open_streams == 1


async def test_a_heartbeat_reaches_every_open_page_of_the_run_through_one_look(
    service_settings: Settings, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "read")
    run = await make_run(
        db_engine, await make_scraper(db_engine, who.owner), status=RunStatus.RUNNING
    )
    live = f"{DASH}/scrapers/{run.scraper_id}/runs/{run.id}/live"
    async with (
        live_server(create_app(service_settings)) as server,
        server.client() as one,
        server.client() as other,
    ):
        await sign_in(one, who)
        await sign_in(other, who)  # a second session of the same owner
        async with contextlib.AsyncExitStack() as streams:
            feeds = [await open_feed(streams, c, live) for c in (one, other) * 3]
            # What the worker's heartbeat does: its log lines and counters, committed,
            # then the run announced.
            async with db_engine.begin() as connection:
                line = LogLine(LogLevel.INFO, datetime.now(UTC), "fetched page seven")
                await insert_lines(connection, run.id, [line])
                await connection.execute(
                    text("UPDATE runs SET pages_fetched = 7 WHERE id = :id"), {"id": run.id}
                )
            before = server.checkouts
            await server.announce(LIVE_SUBJECT, run.id)
            await asyncio.gather(*(feed.until("fetched page seven") for feed in feeds))
            assert server.checkouts - before == 1
