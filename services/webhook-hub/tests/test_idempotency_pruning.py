"""Idempotency keys past their window are deleted by the worker, in batches."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine
from webhook_hub.producer_events.pruning import prune_expired_keys
from webhook_hub.settings import Settings
from webhook_hub.worker import run as run_worker


async def add_keys(engine: AsyncEngine, owner: str, ages_hours: list[float]) -> None:
    async with engine.begin() as conn:
        for index, age in enumerate(ages_hours):
            await conn.execute(
                text(
                    "INSERT INTO idempotency_keys (owner, key, event_id, created_at)"
                    " VALUES (:owner, :key, :event_id, now() - make_interval(secs => :age))"
                ),
                {
                    "owner": owner,
                    "key": f"key-{index}",
                    "event_id": uuid.uuid4(),
                    "age": age * 3600,
                },
            )


async def keys_left(engine: AsyncEngine, owner: str) -> list[str]:
    async with engine.connect() as conn:
        rows = await conn.execute(
            text("SELECT key FROM idempotency_keys WHERE owner = :owner ORDER BY key"),
            {"owner": owner},
        )
        return [row[0] for row in rows]


async def test_keys_older_than_the_cutoff_are_deleted_batch_by_batch_and_younger_kept(
    db_engine: AsyncEngine,
) -> None:
    owner = f"prune-{uuid.uuid4().hex[:8]}"
    # Seven past the window (three batches of three), two inside it.
    await add_keys(db_engine, owner, [30, 40, 50, 60, 70, 80, 90, 1, 23])
    deleted = await prune_expired_keys(db_engine, datetime.now(UTC) - timedelta(hours=24), batch=3)
    assert deleted >= 7  # other tests' aged keys go too
    assert await keys_left(db_engine, owner) == ["key-7", "key-8"]


@pytest.fixture
async def pruning_worker(fast_settings: Settings) -> AsyncIterator[Settings]:
    settings = fast_settings.model_copy(
        update={"idempotency_prune_seconds": 0.1, "idempotency_window_hours": 2.0}
    )
    stop = asyncio.Event()
    task = asyncio.create_task(run_worker(settings, stop))
    yield settings
    stop.set()
    await asyncio.wait_for(task, 30)


async def test_the_worker_prunes_keys_past_the_window_it_is_given(
    db_engine: AsyncEngine, pruning_worker: Settings
) -> None:
    owner = f"prune-{uuid.uuid4().hex[:8]}"
    await add_keys(db_engine, owner, [3, 1])  # a window of 2 h: the first is past it
    for _ in range(200):
        if await keys_left(db_engine, owner) == ["key-1"]:
            break
        await asyncio.sleep(0.1)
    assert await keys_left(db_engine, owner) == ["key-1"]
