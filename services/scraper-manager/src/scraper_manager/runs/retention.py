"""Retention of runs with their results and logs: what the worker deletes, and how (and, in
the same round, the per-host budget's rows of hosts idle past `host_budget_idle_seconds`).

A finished run (completed, failed, stopped, or a skipped firing) is deleted with its items and
its log once it finished more than `RESULT_RETENTION_DAYS` ago, or once its scraper has more
than `keep_runs` finished runs newer than it (a scraper's own setting; none: by age only).
Never deleted:

- a pending or running run, nor anything of it: a crawl in progress loses nothing;
- a scraper's latest run that is not a skipped firing, whatever its age: it is the scraper's
  status, `last_run` and `items_count`, and "the latest results".

Deletion is bounded at every step: runs are chosen `RUN_BATCH` at a time (by the index on
`finished_at`, or per scraper by `(scraper_id, id)`); their items, then their log lines, go
`batch` rows per transaction; the run rows last, so an interrupted round leaves runs that the
next round chooses again and finishes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from servicekit.retention import delete_in_batches, pruning_loop
from servicekit.worker import WorkerLoop
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from scraper_manager.crawler.host_budget import prune_idle_hosts
from scraper_manager.settings import Settings

LOOP = "run-retention"
# Runs chosen per round trip; their items and log lines go in batches of their own.
RUN_BATCH = 100
BATCH = 5000

_EXPIRED = text(
    """
    SELECT r.id FROM runs r
    WHERE r.finished_at < :cutoff
      AND r.status NOT IN ('pending', 'running')
      -- never the scraper's latest run that is not a skipped firing
      AND (r.status = 'skipped' OR EXISTS (
          SELECT 1 FROM runs later
          WHERE later.scraper_id = r.scraper_id AND later.id > r.id
            AND later.status <> 'skipped'
      ))
    ORDER BY r.finished_at
    LIMIT :runs
    """
)
# Past each scraper's `keep_runs` newest finished runs; scrapers without it are skipped.
_SURPLUS = text(
    """
    SELECT r.id FROM scrapers s
    CROSS JOIN LATERAL (
        SELECT id, scraper_id, status FROM runs
        WHERE runs.scraper_id = s.id AND runs.status NOT IN ('pending', 'running')
        ORDER BY runs.id DESC
        OFFSET s.keep_runs
    ) r
    WHERE s.keep_runs IS NOT NULL
      -- never the scraper's latest run that is not a skipped firing
      AND (r.status = 'skipped' OR EXISTS (
          SELECT 1 FROM runs later
          WHERE later.scraper_id = r.scraper_id AND later.id > r.id
            AND later.status <> 'skipped'
      ))
    LIMIT :runs
    """
)
_ITEMS = text(
    "DELETE FROM items WHERE id IN (SELECT id FROM items WHERE run_id = ANY(:runs) LIMIT :batch)"
)
_LOG_LINES = text(
    "DELETE FROM run_log_lines WHERE id IN"
    " (SELECT id FROM run_log_lines WHERE run_id = ANY(:runs) LIMIT :batch)"
)
# The status again: a run chosen is finished, and a finished run never runs again.
_RUNS = text("DELETE FROM runs WHERE id = ANY(:runs) AND status NOT IN ('pending', 'running')")


@dataclass(frozen=True)
class Pruned:
    runs: int = 0
    items: int = 0
    log_lines: int = 0

    def __add__(self, other: Pruned) -> Pruned:
        return Pruned(
            self.runs + other.runs,
            self.items + other.items,
            self.log_lines + other.log_lines,
        )


def _nothing() -> None:
    return None


async def delete_runs(
    engine: AsyncEngine,
    run_ids: list[int],
    *,
    batch: int = BATCH,
    progress: Callable[[], None] = _nothing,
) -> Pruned:
    """Delete these finished runs: their items, their log lines, then the runs."""
    parameters = {"runs": run_ids}
    items = await delete_in_batches(engine, _ITEMS, parameters, batch=batch, progress=progress)
    lines = await delete_in_batches(engine, _LOG_LINES, parameters, batch=batch, progress=progress)
    async with engine.begin() as connection:
        runs = int((await connection.execute(_RUNS, parameters)).rowcount or 0)
    return Pruned(runs, items, lines)


async def prune_runs(
    engine: AsyncEngine,
    now: datetime,
    retention: timedelta,
    *,
    batch: int = BATCH,
    run_batch: int = RUN_BATCH,
    progress: Callable[[], None] = _nothing,
) -> Pruned:
    """Delete the runs past `retention` at `now` (the caller's clock) and those past their
    scraper's `keep_runs`, with their results and logs; what was deleted."""
    total = Pruned()
    for choose, parameters in (
        (_EXPIRED, {"cutoff": now - retention}),
        (_SURPLUS, {}),
    ):
        while True:
            async with engine.connect() as connection:
                chosen = await connection.execute(choose, {**parameters, "runs": run_batch})
                run_ids = [int(row[0]) for row in chosen]
            if not run_ids:
                break
            deleted = await delete_runs(engine, run_ids, batch=batch, progress=progress)
            total += deleted
            # A short choice was the last; none of a full one deleted would be chosen again.
            if len(run_ids) < run_batch or deleted.runs == 0:
                break
    return total


def run_retention_loop(settings: Settings) -> WorkerLoop:
    retention = timedelta(days=settings.result_retention_days)
    batch = settings.retention_batch_size

    async def prune(engine: AsyncEngine, now: datetime, progress: Callable[[], None]) -> int:
        pruned = await prune_runs(engine, now, retention, batch=batch, progress=progress)
        # The per-host budget's rows of hosts no run has asked for in a long while.
        hosts = await prune_idle_hosts(
            engine, settings.host_budget_idle_seconds, batch=batch, progress=progress
        )
        return pruned.runs + hosts

    return pruning_loop(LOOP, prune, settings.retention_prune_seconds)
