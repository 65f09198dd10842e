"""The portal's figures on a million-row delivery log, read through the hourly rollup of
migration 0010: wall-clock timings of what a page calls (`PortalStatsService`), cold (the
rollup empty: the first view computes every hour from the log and stores the settled ones) and
warm (later views: the rollup, plus the log for the hours not settled yet).

Starts an embedded PostgreSQL in a temporary folder, migrates to head, writes ROWS deliveries
spread over 7 days across ENDPOINTS endpoints (or all on one with --one-endpoint, the worst
case; 90 % succeeded, 8 % failed) with generate_series, each holding its first attempt (as
the engine writes them since migration 0014), each one not succeeded with a retry in the
attempt log; 2 % of the deliveries of the last --pending-hours hours (default 2: a healthy
endpoint, whose pending deliveries are the ones in flight or in their first retries) are still
pending, and keep their hours live. Stops by itself.
Run: `uv run --frozen python services/webhook-hub/bench/portal_charts.py [--one-endpoint]`.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
from servicekit.db.admin import database_url_for, ensure_database
from servicekit.db.engine import create_session_factory
from servicekit.db.migrations import upgrade
from servicekit.embedded.postgres import EmbeddedPostgres
from sqlalchemy.ext.asyncio import create_async_engine
from webhook_hub.deliveries.hour_stats_repository import HOURS_FROM_LOG, LIVE_SAMPLE, STORED_HOURS
from webhook_hub.partitions import CLOCK_MARGIN
from webhook_hub.portal.charts import truncate
from webhook_hub.portal.stats import PortalStatsService

MIGRATIONS = Path(__file__).resolve().parent.parent / "migrations"
ENDPOINTS = 100
PAGE = 50  # endpoints on one page of the list

SEED = """
INSERT INTO consumers (owner, id, created_at) VALUES ('bench', gen_random_uuid(), now());
INSERT INTO subscriptions (id, consumer_id, owner, endpoint_url, secret, events, is_active,
  headers, timeout_seconds, created_at, updated_at)
SELECT s.id, (SELECT id FROM consumers WHERE owner = 'bench'), 'bench',
  'http://127.0.0.1/hook', 'c2VjcmV0', ARRAY['*'], true, '{}', 10, now(), now()
FROM unnest(%(ids)s::uuid[]) AS s(id);
INSERT INTO deliveries (id, subscription_id, event_id, event_type, payload, event_time, status,
  attempts, created_at, first_status_code, first_duration_ms)
SELECT gen_random_uuid(), sid, gen_random_uuid(), 'order.paid', '{"id": 1}', t, s,
  CASE WHEN s = 'succeeded' THEN 1 ELSE 2 END, t, CASE WHEN s = 'succeeded' THEN 200 ELSE 500 END,
  (20 + (random() * random() * 900))::int
FROM (
  SELECT now() - (i * interval '7 days' / %(rows)s) AS t,
         CASE WHEN %(one)s THEN %(big)s ELSE (%(ids)s::uuid[])[1 + i %% %(endpoints)s] END AS sid,
         CASE WHEN i %% 50 = 0 AND i * interval '7 days' / %(rows)s
                   < %(pending_hours)s * interval '1 hour' THEN 'pending'
              WHEN i %% 12 = 0 THEN 'failed'
              ELSE 'succeeded' END AS s
  FROM generate_series(1, %(rows)s) AS i
) AS g;
INSERT INTO delivery_attempts (id, delivery_id, attempted_at, status_code, duration_ms)
SELECT gen_random_uuid(), d.id, d.created_at + interval '1 minute', 500,
  (20 + (random() * random() * 900))::int
FROM deliveries AS d WHERE d.status <> 'succeeded';
"""


def psycopg_sql(sql: str) -> str:
    """SQLAlchemy's `:name` parameters as psycopg's `%(name)s`."""
    return re.sub(r"(?<![:\w]):(\w+)", r"%(\1)s", sql)


async def timed(call: Callable[[], Awaitable[Any]]) -> float:
    started = time.perf_counter()
    await call()
    return (time.perf_counter() - started) * 1000


async def measure(url: str, big: uuid.UUID, page: list[uuid.UUID]) -> None:
    engine = create_async_engine(url)
    sessions = create_session_factory(engine)

    async def success_rates() -> None:
        async with sessions() as session, session.begin():
            await PortalStatsService(session).success_rates(page)

    async def charts() -> None:
        async with sessions() as session, session.begin():
            await PortalStatsService(session).charts(big)

    try:
        for name, call in (
            ("24 h success rate, a page of 50 endpoints", success_rates),
            ("endpoint charts (per hour, per day, latency)", charts),
        ):
            async with engine.begin() as connection:
                await connection.exec_driver_sql("TRUNCATE delivery_hour_stats")
            cold = await timed(call)
            warm = [await timed(call) for _ in range(5)]
            print(
                f"{name:46} cold {cold:8.1f} ms   warm median {statistics.median(warm):6.1f} ms"
                f"  (runs {', '.join(f'{w:.1f}' for w in warm)})"
            )
    finally:
        await engine.dispose()


def show_plans(url: str, big: uuid.UUID) -> None:
    """EXPLAIN ANALYZE of a warm view's two reads: the rollup, and the live hours' log."""
    with psycopg.connect(url.replace("+psycopg", "")) as conn:
        hour = truncate(datetime.now(UTC), "hour")
        for sql, params in (
            (STORED_HOURS, {"ids": [big], "since": hour - timedelta(days=7)}),
            (
                HOURS_FROM_LOG,
                {
                    # The last hour (over) and the current one (open), as a page asks for them.
                    "sids": [big, big],
                    "hours": [hour - timedelta(hours=1), hour],
                    "over": [True, False],
                    "recent": [True, True],
                    "charted": [True, True],
                    "live_sample": LIVE_SAMPLE,
                    "clock_margin": CLOCK_MARGIN,
                },
            ),
        ):
            rows = conn.execute(f"EXPLAIN (ANALYZE, BUFFERS) {psycopg_sql(sql)}", params)
            print("\n   " + "\n   ".join(str(row[0]) for row in rows))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--one-endpoint", action="store_true", help="every row on one endpoint")
    parser.add_argument("--pending-hours", type=int, default=2)
    parser.add_argument("--plans", action="store_true", help="print the warm reads' plans")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        postgres = EmbeddedPostgres(Path(workdir) / "pg")
        postgres.start()
        try:
            url = database_url_for(postgres.url, "webhook_hub_portal_bench")
            ensure_database(url)
            upgrade(MIGRATIONS, url)
            ids = [uuid.uuid4() for _ in range(ENDPOINTS)]
            big = ids[0]
            started = time.monotonic()
            with psycopg.connect(url.replace("+psycopg", ""), autocommit=True) as conn:
                params = {
                    "ids": ids,
                    "big": big,
                    "one": args.one_endpoint,
                    "endpoints": ENDPOINTS,
                    "rows": args.rows,
                    "pending_hours": args.pending_hours,
                }
                for statement in filter(str.strip, SEED.split(";\n")):
                    names = set(re.findall(r"%\((\w+)\)s", statement))
                    conn.execute(statement, {k: v for k, v in params.items() if k in names})
                conn.execute("VACUUM ANALYZE deliveries")
                conn.execute("VACUUM ANALYZE delivery_attempts")
            print(
                f"{args.rows:,} deliveries and attempts written in {time.monotonic() - started:.0f} s"
                f" ({'all on one endpoint' if args.one_endpoint else f'over {ENDPOINTS} endpoints'},"
                f" pending in the last {args.pending_hours} h)"
            )
            asyncio.run(measure(url, big, ids[:PAGE]))
            if args.plans:
                show_plans(url, big)
        finally:
            postgres.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
