"""Cron firings with a controlled clock: a run per due time, skipped while running, once
across replicas, one catch-up after downtime."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

import httpx
from scraper_manager.scheduling.scheduler import fire_due
from servicekit.db.engine import create_session_factory
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine
from structlog.testing import capture_logs

from tests.factories import make_client, scraper_body

BASE = "/api/v1/scrapers"


async def scheduled_scraper(
    client: httpx.AsyncClient, engine: AsyncEngine
) -> tuple[int, dict[str, str]]:
    who = await make_client(engine, "write")
    response = await client.post(
        BASE, json=scraper_body(schedule="*/5 * * * *"), headers=who.headers
    )
    return int(response.json()["id"]), who.headers


async def runs_of(engine: AsyncEngine, scraper_id: int) -> list[tuple[str, str]]:
    async with engine.connect() as conn:
        rows = await conn.execute(
            text("SELECT status, trigger FROM runs WHERE scraper_id = :s ORDER BY id"),
            {"s": scraper_id},
        )
        return [(r.status, r.trigger) for r in rows]


async def due_at(engine: AsyncEngine, scraper_id: int) -> datetime:
    async with engine.connect() as conn:
        value = await conn.scalar(
            text("SELECT next_fire_at FROM scrapers WHERE id = :s"), {"s": scraper_id}
        )
    assert isinstance(value, datetime)
    return value


async def test_a_due_schedule_creates_a_pending_run_and_moves_on(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    scraper_id, _ = await scheduled_scraper(client, db_engine)
    due = await due_at(db_engine, scraper_id)
    assert due.minute % 5 == 0
    await fire_due(create_session_factory(db_engine), now=due - timedelta(seconds=1))
    assert await runs_of(db_engine, scraper_id) == []
    await fire_due(create_session_factory(db_engine), now=due)
    assert await runs_of(db_engine, scraper_id) == [("pending", "schedule")]
    assert await due_at(db_engine, scraper_id) == due + timedelta(minutes=5)


async def test_a_firing_while_running_is_recorded_as_skipped(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    scraper_id, headers = await scheduled_scraper(client, db_engine)
    await client.post(f"{BASE}/{scraper_id}/run", headers=headers)
    due = await due_at(db_engine, scraper_id)
    await fire_due(create_session_factory(db_engine), now=due)
    assert await runs_of(db_engine, scraper_id) == [("pending", "manual"), ("skipped", "schedule")]
    view = (await client.get(f"{BASE}/{scraper_id}/status", headers=headers)).json()
    assert view["status"] == "pending"
    history = (await client.get(f"{BASE}/{scraper_id}/runs", headers=headers)).json()["data"]
    assert history[0]["status"] == "skipped"
    assert "still pending" in history[0]["last_error"]


async def test_two_replicas_fire_a_due_time_once(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    scraper_id, _ = await scheduled_scraper(client, db_engine)
    due = await due_at(db_engine, scraper_id)
    replica_a, replica_b = create_session_factory(db_engine), create_session_factory(db_engine)
    await asyncio.gather(fire_due(replica_a, now=due), fire_due(replica_b, now=due))
    assert await runs_of(db_engine, scraper_id) == [("pending", "schedule")]


async def test_missed_firings_after_downtime_become_one_catch_up_run(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    scraper_id, _ = await scheduled_scraper(client, db_engine)
    due = await due_at(db_engine, scraper_id)
    hours_later = due + timedelta(hours=3, minutes=2)
    await fire_due(create_session_factory(db_engine), now=hours_later)
    assert await runs_of(db_engine, scraper_id) == [("pending", "schedule")]
    assert await due_at(db_engine, scraper_id) > hours_later


async def test_a_scraper_whose_schedule_cannot_be_evaluated_fails_alone_and_the_rest_fire(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    first, _ = await scheduled_scraper(client, db_engine)
    broken, _ = await scheduled_scraper(client, db_engine)
    last, _ = await scheduled_scraper(client, db_engine)
    due = max([await due_at(db_engine, s) for s in (first, broken, last)])
    # As stored before schedules were checked: a timezone that does not exist.
    async with db_engine.begin() as conn:
        await conn.execute(
            text("UPDATE scrapers SET timezone = 'Mars/Olympus_Mons' WHERE id = :s"), {"s": broken}
        )
    with capture_logs() as lines:
        await fire_due(create_session_factory(db_engine), now=due)
    assert await runs_of(db_engine, first) == [("pending", "schedule")]
    assert await runs_of(db_engine, last) == [("pending", "schedule")]
    assert await runs_of(db_engine, broken) == [("failed", "schedule")]
    async with db_engine.connect() as conn:
        row = (
            await conn.execute(
                text(
                    "SELECT s.next_fire_at, r.last_error FROM scrapers s"
                    " JOIN runs r ON r.scraper_id = s.id WHERE s.id = :s"
                ),
                {"s": broken},
            )
        ).one()
    assert row.next_fire_at is None  # not tried again every tick
    assert "Mars/Olympus_Mons" in row.last_error
    errors = [line for line in lines if line["log_level"] == "error"]
    assert [(line["loop"], line["scraper_id"]) for line in errors] == [("scheduler", broken)]
