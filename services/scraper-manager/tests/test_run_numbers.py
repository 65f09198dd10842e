"""Runs are numbered per scraper (#1, #2, #3 for each), whichever way they are made, and the
migration numbers the runs made before it in the order they were made."""

from __future__ import annotations

import asyncio
import os

import httpx
from scraper_manager.cli import MIGRATIONS
from servicekit.db.admin import database_url_for, drop_database, ensure_database
from servicekit.db.engine import to_sqlalchemy_url
from servicekit.db.migrations import upgrade
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import NullPool

from tests.factories import make_client, make_run, make_scraper


async def test_each_scrapers_runs_are_numbered_from_one_whatever_the_other_scrapers_do(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "write")
    first = await make_scraper(db_engine, who.owner)
    second = await make_scraper(db_engine, who.owner)
    for scraper in (first, second, first, first, second):
        await make_run(db_engine, scraper)
    answer = await client.get(f"/api/v1/scrapers/{first.id}/runs", headers=who.headers)
    assert [run["number"] for run in answer.json()["data"]] == [3, 2, 1]
    answer = await client.get(f"/api/v1/scrapers/{second.id}/runs", headers=who.headers)
    assert [run["number"] for run in answer.json()["data"]] == [2, 1]


async def test_a_run_started_over_the_api_answers_with_its_scrapers_next_number(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "write")
    scraper = await make_scraper(db_engine, who.owner)
    await make_run(db_engine, await make_scraper(db_engine, who.owner))  # another scraper's
    await make_run(db_engine, scraper)
    started = await client.post(f"/api/v1/scrapers/{scraper.id}/run", headers=who.headers)
    run_id = started.json()["run_id"]
    run = await client.get(f"/api/v1/scrapers/{scraper.id}/runs/{run_id}", headers=who.headers)
    assert run.json()["number"] == 2


async def test_a_number_is_never_given_again_after_the_latest_run_is_deleted(
    db_engine: AsyncEngine,
) -> None:
    scraper = await make_scraper(db_engine, "someone")
    await make_run(db_engine, scraper)
    latest = await make_run(db_engine, scraper)
    async with db_engine.begin() as connection:
        await connection.execute(text("DELETE FROM runs WHERE id = :id"), {"id": latest.id})
    assert (await make_run(db_engine, scraper)).number == 3


async def test_the_migration_numbers_existing_runs_per_scraper_in_the_order_they_were_made(
    postgres_server_url: str,
) -> None:
    url = database_url_for(postgres_server_url, f"run_numbers_{os.getpid()}")
    drop_database(url)
    ensure_database(url)
    engine = create_async_engine(to_sqlalchemy_url(url), poolclass=NullPool)
    try:
        await asyncio.to_thread(upgrade, MIGRATIONS, url, "0011_retention")
        async with engine.begin() as connection:
            first, second = (
                await connection.execute(
                    text(
                        "INSERT INTO scrapers (owner, name, url, timezone, rate_limit, headers,"
                        " max_pages, selectors, obey_robots, concurrency, timeout_seconds,"
                        " created_at, updated_at) SELECT 'someone', 'shop', 'http://x/', 'UTC',"
                        " 5, '{}', 10, '{}', true, 4, 30, now(), now()"
                        " FROM generate_series(1, 2) RETURNING id"
                    )
                )
            ).scalars()
            runs = [
                (
                    await connection.execute(
                        text(
                            "INSERT INTO runs (scraper_id, owner, status, trigger, created_at,"
                            " items_collected, pages_fetched, requests_failed, retries,"
                            " bytes_received, status_counts, stop_requested) VALUES (:s,"
                            " 'someone', 'completed', 'manual', now(), 0, 0, 0, 0, 0, '{}',"
                            " false) RETURNING id"
                        ),
                        {"s": scraper},
                    )
                ).scalar_one()
                for scraper in (first, second, first, second, first)
            ]
        await asyncio.to_thread(upgrade, MIGRATIONS, url, "head")
        async with engine.begin() as connection:
            rows = (await connection.execute(text("SELECT id, number FROM runs ORDER BY id"))).all()
            assert [(row.id, row.number) for row in rows] == [
                (runs[0], 1),
                (runs[1], 1),
                (runs[2], 2),
                (runs[3], 2),
                (runs[4], 3),
            ]
            # The scraper's counter goes on from there.
            number = await connection.scalar(
                text(
                    "INSERT INTO runs (scraper_id, owner, status, trigger, created_at,"
                    " items_collected, pages_fetched, requests_failed, retries, bytes_received,"
                    " status_counts, stop_requested) VALUES (:s, 'someone', 'pending', 'manual',"
                    " now(), 0, 0, 0, 0, 0, '{}', false) RETURNING number"
                ),
                {"s": first},
            )
            assert number == 4
    finally:
        await engine.dispose()
        drop_database(url)
