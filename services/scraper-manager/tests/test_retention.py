"""Retention of runs, results and logs (scraper_manager.runs.retention), of dashboard links,
and a scraper's `keep_runs` over the API, on a clock the test sets.

The clock is set in 2001: other tests' runs (finished now) are never past its cutoff, and
only the scrapers made here have `keep_runs`."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from scraper_manager.models import DashboardLink, RunStatus, Scraper
from scraper_manager.runs.retention import prune_runs
from servicekit.retention import prune_links
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.dashboard import DASH, sign_in
from tests.factories import make_client, make_scraper, scraper_body

NOW = datetime(2001, 1, 1, 12, tzinfo=UTC)
DAY = timedelta(days=1)
RETENTION = 30 * DAY
BASE = "/api/v1/scrapers"


async def add_run(
    engine: AsyncEngine,
    scraper: Scraper,
    *,
    status: RunStatus = RunStatus.COMPLETED,
    finished: datetime | None = None,
    items: int = 2,
    log_lines: int = 2,
) -> int:
    """A run of `scraper` with `items` results and `log_lines` lines of log; finished at
    `finished` (none for a pending or running run, started long ago)."""
    async with engine.begin() as connection:
        run_id = int(
            await connection.scalar(
                text(
                    "INSERT INTO runs (scraper_id, owner, status, trigger, created_at,"
                    " started_at, finished_at, items_collected, pages_fetched, requests_failed,"
                    " retries, bytes_received, status_counts, stop_requested)"
                    " VALUES (:scraper, :owner, :status, 'manual', :created, :created,"
                    " :finished, :items, 0, 0, 0, 0, '{}', false) RETURNING id"
                ),
                {
                    "scraper": scraper.id,
                    "owner": scraper.owner,
                    "status": status.value,
                    "created": (finished or NOW) - 400 * DAY,
                    "finished": finished,
                    "items": items,
                },
            )
        )
        await connection.execute(
            text(
                "INSERT INTO items (run_id, scraper_id, url, data, created_at)"
                " SELECT :run, :scraper, 'http://127.0.0.1:9/p' || n, '{}', :at"
                " FROM generate_series(1, :count) AS n"
            ),
            {"run": run_id, "scraper": scraper.id, "at": NOW - 400 * DAY, "count": items},
        )
        await connection.execute(
            text(
                "INSERT INTO run_log_lines (run_id, level, at, message, fields)"
                " SELECT :run, 'info', :at, 'line ' || n, '{}'"
                " FROM generate_series(1, :count) AS n"
            ),
            {"run": run_id, "at": NOW, "count": log_lines},
        )
    return run_id


async def left(engine: AsyncEngine, run_ids: list[int]) -> dict[int, tuple[int, int]]:
    """Each remaining run of `run_ids` with its counts of items and log lines."""
    async with engine.connect() as connection:
        rows = await connection.execute(
            text(
                "SELECT r.id,"
                " (SELECT count(*) FROM items i WHERE i.run_id = r.id),"
                " (SELECT count(*) FROM run_log_lines l WHERE l.run_id = r.id)"
                " FROM runs r WHERE r.id = ANY(:ids)"
            ),
            {"ids": run_ids},
        )
        return {int(row[0]): (int(row[1]), int(row[2])) for row in rows}


async def scraper_of(engine: AsyncEngine, **fields: Any) -> Scraper:
    return await make_scraper(engine, f"retention-{uuid.uuid4().hex[:8]}", **fields)


# -- RESULT_RETENTION_DAYS ----------------------------------------------------------------------


async def test_runs_finished_before_the_retention_go_with_their_results_and_logs(
    db_engine: AsyncEngine,
) -> None:
    scraper = await scraper_of(db_engine)
    expired = [
        await add_run(db_engine, scraper, finished=NOW - RETENTION - timedelta(seconds=1)),
        await add_run(db_engine, scraper, status=RunStatus.FAILED, finished=NOW - 90 * DAY),
        await add_run(db_engine, scraper, status=RunStatus.STOPPED, finished=NOW - 40 * DAY),
    ]
    kept = await add_run(db_engine, scraper, finished=NOW - RETENTION + timedelta(hours=1))

    pruned = await prune_runs(db_engine, NOW, RETENTION)

    assert (pruned.runs, pruned.items, pruned.log_lines) == (3, 6, 6)
    assert await left(db_engine, [*expired, kept]) == {kept: (2, 2)}


async def test_a_running_or_pending_run_and_its_results_are_never_deleted(
    db_engine: AsyncEngine,
) -> None:
    # keep_runs=1 and every other run expired: nothing of the active runs may go either way.
    scraper = await scraper_of(db_engine, keep_runs=1)
    finished = [await add_run(db_engine, scraper, finished=NOW - 60 * DAY) for _ in range(2)]
    running = await add_run(db_engine, scraper, status=RunStatus.RUNNING, items=7, log_lines=3)
    other = await scraper_of(db_engine, keep_runs=1)
    pending = await add_run(db_engine, other, status=RunStatus.PENDING, items=0, log_lines=0)

    await prune_runs(db_engine, NOW, RETENTION, batch=2)

    assert await left(db_engine, [*finished, running, pending]) == {
        running: (7, 3),
        pending: (0, 0),
    }


async def test_a_scrapers_latest_run_is_kept_past_the_retention_so_its_status_stays(
    db_engine: AsyncEngine,
) -> None:
    scraper = await scraper_of(db_engine)
    older = await add_run(db_engine, scraper, finished=NOW - 100 * DAY)
    latest = await add_run(db_engine, scraper, status=RunStatus.FAILED, finished=NOW - 99 * DAY)
    # A skipped firing after it is history, not the scraper's status: it goes, the run stays.
    skipped = await add_run(
        db_engine, scraper, status=RunStatus.SKIPPED, finished=NOW - 98 * DAY, items=0
    )

    await prune_runs(db_engine, NOW, RETENTION)

    assert await left(db_engine, [older, latest, skipped]) == {latest: (2, 2)}


# -- keep_runs ----------------------------------------------------------------------------------


async def test_keep_runs_keeps_the_latest_finished_runs_of_its_scraper_only(
    db_engine: AsyncEngine,
) -> None:
    scraper = await scraper_of(db_engine, keep_runs=2)
    runs = [await add_run(db_engine, scraper, finished=NOW - DAY) for _ in range(5)]
    unlimited = await scraper_of(db_engine)
    theirs = [await add_run(db_engine, unlimited, finished=NOW - DAY) for _ in range(5)]

    pruned = await prune_runs(db_engine, NOW, RETENTION)

    assert pruned.runs == 3
    assert await left(db_engine, runs) == {runs[3]: (2, 2), runs[4]: (2, 2)}
    assert set(await left(db_engine, theirs)) == set(theirs)


async def test_keep_runs_counts_finished_runs_and_not_the_one_running(
    db_engine: AsyncEngine,
) -> None:
    scraper = await scraper_of(db_engine, keep_runs=1)
    first = await add_run(db_engine, scraper, finished=NOW - 2 * DAY)
    second = await add_run(db_engine, scraper, finished=NOW - DAY)
    running = await add_run(db_engine, scraper, status=RunStatus.RUNNING)

    await prune_runs(db_engine, NOW, RETENTION)

    assert set(await left(db_engine, [first, second, running])) == {second, running}


async def test_more_runs_and_results_than_one_batch_are_all_deleted_batch_by_batch(
    db_engine: AsyncEngine,
) -> None:
    scraper = await scraper_of(db_engine)
    expired = [
        await add_run(db_engine, scraper, finished=NOW - 60 * DAY, items=7, log_lines=5)
        for _ in range(5)
    ]
    latest = await add_run(db_engine, scraper, finished=NOW - DAY)
    batches: list[None] = []

    pruned = await prune_runs(
        db_engine, NOW, RETENTION, batch=3, run_batch=2, progress=lambda: batches.append(None)
    )

    assert (pruned.runs, pruned.items, pruned.log_lines) == (5, 35, 25)
    assert await left(db_engine, [*expired, latest]) == {latest: (2, 2)}
    # Runs in 3 groups (2, 2, 1); each group's 14 / 14 / 7 items and 10 / 10 / 5 lines in
    # statements of at most 3 rows, the last of each short (or empty).
    assert len(batches) == (5 + 5 + 3) + (4 + 4 + 2)


# -- keep_runs over the API ---------------------------------------------------------------------


@pytest.mark.parametrize("value", [0, 10_001, "many"])
async def test_keep_runs_outside_1_to_10000_is_422_naming_the_field(
    client: httpx.AsyncClient, db_engine: AsyncEngine, value: object
) -> None:
    who = await make_client(db_engine, "write")
    created = await client.post(BASE, json=scraper_body(keep_runs=value), headers=who.headers)
    good = await client.post(BASE, json=scraper_body(), headers=who.headers)
    patched = await client.patch(
        f"{BASE}/{good.json()['id']}", json={"keep_runs": value}, headers=who.headers
    )
    for response in (created, patched):
        assert response.status_code == 422, response.text
        assert [detail["loc"][-1] for detail in response.json()["details"]] == ["keep_runs"]


async def test_keep_runs_is_set_shown_changed_and_cleared_over_the_api(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "write")
    created = await client.post(BASE, json=scraper_body(keep_runs=10), headers=who.headers)
    assert created.status_code == 201, created.text
    path = f"{BASE}/{created.json()['id']}"
    assert created.json()["keep_runs"] == 10

    changed = await client.patch(path, json={"keep_runs": 10_000}, headers=who.headers)
    assert changed.json()["keep_runs"] == 10_000
    untouched = await client.patch(path, json={"rate_limit": 2}, headers=who.headers)
    assert untouched.json()["keep_runs"] == 10_000
    cleared = await client.patch(path, json={"keep_runs": None}, headers=who.headers)
    assert cleared.json()["keep_runs"] is None
    assert (await client.get(path, headers=who.headers)).json()["keep_runs"] is None


async def test_a_scraper_without_keep_runs_shows_null(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "write")
    created = await client.post(BASE, json=scraper_body(), headers=who.headers)
    assert created.json()["keep_runs"] is None


# -- dashboard links ----------------------------------------------------------------------------


async def test_dashboard_links_expired_longer_than_the_retention_are_deleted(
    db_engine: AsyncEngine,
) -> None:
    retention = timedelta(hours=168)
    old, recent = uuid.uuid4().hex, uuid.uuid4().hex
    async with db_engine.begin() as connection:
        for token_hash, expires_at, used_at in (
            (old, NOW - retention - timedelta(minutes=1), NOW - retention - timedelta(hours=1)),
            (recent, NOW - retention + timedelta(minutes=1), None),
        ):
            await connection.execute(
                text(
                    "INSERT INTO dashboard_links"
                    " (token_hash, owner, level, expires_at, used_at, created_at)"
                    " VALUES (:hash, 'retention', 'read', :expires_at, :used_at, :expires_at)"
                ),
                {"hash": token_hash, "expires_at": expires_at, "used_at": used_at},
            )

    assert await prune_links(db_engine, DashboardLink, NOW, retention) == 1
    async with db_engine.connect() as connection:
        kept = await connection.scalars(
            text("SELECT token_hash FROM dashboard_links WHERE token_hash = ANY(:hashes)"),
            {"hashes": [old, recent]},
        )
        assert list(kept) == [recent]


# -- the dashboard ------------------------------------------------------------------------------


async def test_a_scrapers_dashboard_page_says_which_runs_it_keeps(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "read")
    counted = await make_scraper(db_engine, who.owner, keep_runs=25)
    by_age = await make_scraper(db_engine, who.owner)
    await sign_in(client, who)

    counted_page = (await client.get(f"{DASH}/scrapers/{counted.id}")).text
    by_age_page = (await client.get(f"{DASH}/scrapers/{by_age.id}")).text

    assert "<dt>Runs kept</dt><dd>the latest 25 finished, for up to 30 days" in counted_page
    assert "<dt>Runs kept</dt><dd>30 days after they finish" in by_age_page
