"""Many runs on one worker: they beat together, in one transaction, rather than each with
transactions of its own (what held 500 runs to 223 started on a pool of 20 connections)."""

from __future__ import annotations

import asyncio
import time

import httpx
from scraper_manager.settings import Settings
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.factories import make_client, scraper_body
from tests.website import LocalWebsite

BASE = "/api/v1/scrapers"


async def test_the_runs_of_one_worker_beat_in_one_transaction(
    worker: Settings, client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    site = LocalWebsite(pages=50, delay=0.2)
    await site.start()
    who = await make_client(db_engine, "write")
    runs = []
    try:
        for n in range(3):
            body = scraper_body(url=f"{site.url}/page/{n}", rate_limit=1, max_pages=50)
            scraper_id = (await client.post(BASE, json=body, headers=who.headers)).json()["id"]
            run = await client.post(f"{BASE}/{scraper_id}/run", headers=who.headers)
            runs.append((scraper_id, run.json()["run_id"]))
        ids = [run_id for _, run_id in runs]
        beats: list[object] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            async with db_engine.connect() as connection:
                beats = list(
                    (
                        await connection.execute(
                            text(
                                "SELECT heartbeat_at FROM runs WHERE id = ANY(:ids)"
                                " AND status = 'running' AND heartbeat_at > started_at"
                            ),
                            {"ids": ids},
                        )
                    ).scalars()
                )
            if len(beats) == 3:
                break
            await asyncio.sleep(0.1)
        # now() is the transaction's start: one beat for the three runs.
        assert len(beats) == 3
        assert len(set(beats)) == 1, beats
    finally:
        for scraper_id, _ in runs:
            await client.post(f"{BASE}/{scraper_id}/stop", headers=who.headers)
        await site.stop()
