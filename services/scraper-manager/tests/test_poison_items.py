"""A poison item never stops a batch (issue 30): the run queue's consumer, on the real worker,
NATS and Postgres."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import nats
import pytest
from scraper_manager.crawler.queue import RUNS_STREAM, WORKERS_CONSUMER, run_id_of
from scraper_manager.settings import Settings
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.factories import make_client
from tests.test_crawls import start_crawl, wait_for_status
from tests.test_run_log import worker_with
from tests.website import LocalWebsite


@asynccontextmanager
async def refusing_claims_of(engine: AsyncEngine, run_id: int) -> AsyncIterator[None]:
    """PostgreSQL refuses every update of run `run_id` (a row that raises), until the end."""
    name = f"refuse_run_{run_id}"
    async with engine.begin() as conn:
        await conn.execute(
            text(
                f"CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS"
                " $$ BEGIN RAISE EXCEPTION 'this run cannot be claimed'; END $$"
            )
        )
        await conn.execute(
            text(
                f"CREATE TRIGGER {name} BEFORE UPDATE ON runs FOR EACH ROW"
                f" WHEN (OLD.id = {run_id}) EXECUTE FUNCTION {name}()"
            )
        )
    try:
        yield
    finally:
        async with engine.begin() as conn:
            await conn.execute(text(f"DROP TRIGGER {name} ON runs"))
            await conn.execute(text(f"DROP FUNCTION {name}()"))


async def test_a_queue_message_whose_claim_raises_is_terminated_and_the_runs_behind_it_start(
    service_settings: Settings,
    client: httpx.AsyncClient,
    db_engine: AsyncEngine,
    website: LocalWebsite,
    nats_url: str,
) -> None:
    who = await make_client(db_engine, "write")
    url = f"{website.url}/page/0"
    poison_scraper, poison_run = await start_crawl(client, who, url=url, max_pages=1)
    scraper_id, run_id = await start_crawl(client, who, url=url, max_pages=1)
    connection = await nats.connect(nats_url)
    try:
        js = connection.jetstream()
        # No sweep while the test runs: each run comes through its own queue message.
        async with (
            refusing_claims_of(db_engine, poison_run),
            worker_with(service_settings, requeue_after_seconds=600),
        ):
            run = await wait_for_status(
                client, who, scraper_id, run_id, {"running", "completed", "failed"}, timeout=10
            )
            # The poison message is terminated, not left to come back every ack wait.
            for _ in range(50):
                info = await js.consumer_info(RUNS_STREAM, WORKERS_CONSUMER)
                if info.num_ack_pending == 0:
                    break
                await asyncio.sleep(0.1)
    finally:
        await connection.close()
    assert run["status"] in {"running", "completed", "failed"}
    assert info.num_ack_pending == 0
    poison = await client.get(
        f"/api/v1/scrapers/{poison_scraper}/runs/{poison_run}", headers=who.headers
    )
    assert poison.json()["status"] == "pending"  # the database stays the truth


@pytest.mark.parametrize(
    "data",
    [
        b'{"run_id": 1e400}',
        b'{"run_id": true}',
        b'{"run_id": 3.5}',
        b'{"run_id": -4}',
        b"[" * 100_000,
        b'"run_id"',
        b"\xff\xfe",
    ],
)
def test_a_queue_message_that_names_no_run_is_read_as_none_never_an_exception(
    data: bytes,
) -> None:
    assert run_id_of(data) is None


def test_a_queue_message_names_its_run() -> None:
    assert run_id_of(b'{"run_id": 42}') == 42
