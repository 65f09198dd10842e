"""One politeness budget per site, shared by every run on every worker.

The rule is a token bucket without bursts in its reservation form (GCRA): a host keeps the
time of its last granted request slot; a request asks for the next slot, which is the later of
now and that slot plus the interval, and sleeps until it. One atomic statement reserves the
slot, so any number of processes share it without a lock held across a round trip, and the
waiting happens in the asking process, off the database. The database's clock is the only
clock, so workers on machines whose clocks disagree still agree on the slots.

`next_slot` and `host_interval` are the decisions, pure; `PgHostBudget` applies `next_slot`
in SQL (README, "One politeness budget per site", for why PostgreSQL and not NATS KV)."""

from __future__ import annotations

import asyncio
from typing import Protocol
from urllib.parse import urlsplit

from servicekit.retention import BATCH, Progress, delete_in_batches
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine


def host_of(url: str) -> str | None:
    """The budget's key: the host name, lower case, without port (as Scrapy's download slots:
    one server behind several ports is one site). None for a URL without a host."""
    try:
        host = urlsplit(url).hostname
    except ValueError:
        return None
    return host.lower().rstrip(".") if host else None


# The budget is what the host sees in any second, but a slot is granted by the database's
# clock and reaches the host after a round trip and a wake-up that vary by a few ms: slots
# 5 % further apart than 1/budget leave 50 ms for that spread between a second's first and
# its (budget + 1)th request (`bench/many_runs.py` saw 11 in a second at exactly 1/budget).
BUDGET_SPACING = 1.05


def host_interval(budget_per_second: float | None, crawl_delay: float | None) -> float | None:
    """Seconds between two requests to a host from all runs: the operator's budget (with room
    for the way to the host, `BUDGET_SPACING`), or the robots.txt crawl delay (for a scraper
    that obeys robots) when that is longer. None: no shared budget applies, and the request
    asks nothing of the database."""
    intervals = []
    if budget_per_second is not None and budget_per_second > 0:
        intervals.append(BUDGET_SPACING / budget_per_second)
    if crawl_delay is not None and crawl_delay > 0:
        intervals.append(crawl_delay)
    return max(intervals) if intervals else None


def next_slot(last: float | None, now: float, interval: float) -> float:
    """The slot granted to a request asking at `now` when the host's last slot was `last`
    (None: never asked): never before now, never closer than `interval` to the last slot. The
    slot becomes the host's last; the caller waits `slot - now`."""
    if last is None:
        return now
    return max(now, last + interval)


class HostBudget(Protocol):
    async def reserve(self, host: str, interval: float) -> float:
        """Reserve the host's next slot; the seconds to wait until it."""
        ...


# `next_slot` in one statement: the row's `last_at` is the last slot, `now()` the database's
# clock (the statement's start: the same for both uses). Autocommit: one round trip.
_RESERVE = text(
    """
    INSERT INTO host_budgets AS b (host, last_at) VALUES (:host, now())
    ON CONFLICT (host) DO UPDATE
        SET last_at = greatest(now(), b.last_at + make_interval(secs => :interval))
    RETURNING greatest(EXTRACT(EPOCH FROM b.last_at - now()), 0)
    """
)


class PgHostBudget:
    """The shared budget in PostgreSQL: a row per host (`host_budgets`)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine.execution_options(isolation_level="AUTOCOMMIT")

    async def reserve(self, host: str, interval: float) -> float:
        async with self._engine.connect() as connection:
            wait = await connection.scalar(_RESERVE, {"host": host[:255], "interval": interval})
        return float(wait or 0.0)


async def wait_for_slot(budget: HostBudget, host: str, interval: float) -> float:
    """Reserve and sleep until the slot; the seconds waited."""
    wait = await budget.reserve(host, interval)
    if wait > 0:
        await asyncio.sleep(wait)
    return wait


def _idle() -> None:
    return None


# Rows whose last slot is more than `:idle` seconds old, by the database's clock (the budget's
# only clock), `:batch` at a time. Such a row decides nothing any more: `next_slot` of a last
# slot older than the interval is `now`, exactly as for a host never asked, so deleting it
# changes no request's slot (for any interval shorter than the bound).
_PRUNE_IDLE = text(
    """
    DELETE FROM host_budgets WHERE host IN (
        SELECT host FROM host_budgets
        WHERE last_at < now() - make_interval(secs => :idle)
        LIMIT :batch
    )
    """
)


async def prune_idle_hosts(
    engine: AsyncEngine, idle_seconds: float, *, batch: int = BATCH, progress: Progress = _idle
) -> int:
    """Delete the hosts whose last slot is older than `idle_seconds`; how many."""
    return await delete_in_batches(
        engine, _PRUNE_IDLE, {"idle": idle_seconds}, batch=batch, progress=progress
    )
