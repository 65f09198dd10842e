"""The portal's aggregate queries on a million-row delivery log: EXPLAIN ANALYZE timings with
the indexes before migration 0009 and after it.

Starts an embedded PostgreSQL in a temporary folder, migrates to 0008, writes ROWS deliveries
spread over 7 days across ENDPOINTS endpoints (or all on one with --one-endpoint, the worst
case; 90 % succeeded, 8 % failed, 2 % pending) and one attempt each with generate_series,
then times each query the portal runs
(the SQL is imported from the portal's repository), upgrades to head and times them again.
Stops by itself. Run: `uv run --frozen python services/webhook-hub/bench/portal_charts.py`.
"""

from __future__ import annotations

import argparse
import re
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
from servicekit.db.admin import database_url_for, ensure_database
from servicekit.db.migrations import upgrade
from servicekit.embedded.postgres import EmbeddedPostgres
from webhook_hub.portal.repository import (
    LATENCY_BY_HOUR,
    OUTCOMES_BY_BUCKET,
    OUTCOMES_BY_SUBSCRIPTION,
)

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
  attempts, created_at)
SELECT gen_random_uuid(), sid, gen_random_uuid(), 'order.paid', '{"id": 1}', t, s, 1, t
FROM (
  SELECT now() - (i * interval '7 days' / %(rows)s) AS t,
         CASE WHEN %(one)s THEN %(big)s ELSE (%(ids)s::uuid[])[1 + i %% %(endpoints)s] END AS sid,
         CASE WHEN i %% 50 = 0 THEN 'pending' WHEN i %% 12 = 0 THEN 'failed'
              ELSE 'succeeded' END AS s
  FROM generate_series(1, %(rows)s) AS i
) AS g;
INSERT INTO delivery_attempts (id, delivery_id, attempted_at, status_code, duration_ms)
SELECT gen_random_uuid(), d.id, d.created_at + interval '50 milliseconds', 200,
  (20 + (random() * random() * 900))::int
FROM deliveries AS d;
"""


def psycopg_sql(sql: str) -> str:
    """SQLAlchemy's `:name` parameters as psycopg's `%(name)s`."""
    return re.sub(r"(?<![:\w]):(\w+)", r"%(\1)s", sql)


def explain(conn: psycopg.Connection[Any], sql: str, params: dict[str, Any]) -> tuple[float, str]:
    rows = conn.execute(
        f"EXPLAIN (ANALYZE, BUFFERS, FORMAT TEXT) {psycopg_sql(sql)}", params
    ).fetchall()
    plan = "\n".join(str(row[0]) for row in rows)
    found = re.search(r"Execution Time: ([\d.]+) ms", plan)
    return (float(found.group(1)) if found else float("nan")), plan


def measure(url: str, label: str, big: uuid.UUID, ids: list[uuid.UUID], show: bool) -> None:
    now = datetime.now(UTC)
    day = now - timedelta(hours=24)
    queries = {
        "24 h success rate, 50 endpoints": (OUTCOMES_BY_SUBSCRIPTION, {"ids": ids, "since": day}),
        "per hour, 24 h": (OUTCOMES_BY_BUCKET, {"step": "1 hour", "id": big, "since": day}),
        "per day, 7 days": (
            OUTCOMES_BY_BUCKET,
            {"step": "1 day", "id": big, "since": now - timedelta(days=7)},
        ),
        "latency p50/p95 per hour": (
            LATENCY_BY_HOUR,
            {"id": big, "since": day, "created_since": now - timedelta(hours=48)},
        ),
    }
    with psycopg.connect(url.replace("+psycopg", "")) as conn:
        print(f"\n## {label}")
        for name, (sql, params) in queries.items():
            explain(conn, sql, params)  # warm the cache: pages run on a warm database
            timings = sorted(explain(conn, sql, params)[0] for _ in range(3))
            _, plan = explain(conn, sql, params)
            print(f"{name:34} median {timings[1]:8.1f} ms  (runs {timings})")
            if show:
                print("   " + "\n   ".join(plan.splitlines()))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--one-endpoint", action="store_true", help="every row on one endpoint")
    parser.add_argument("--plans", action="store_true", help="print every query plan")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        postgres = EmbeddedPostgres(Path(workdir) / "pg")
        postgres.start()
        try:
            url = database_url_for(postgres.url, "webhook_hub_portal_bench")
            ensure_database(url)
            upgrade(MIGRATIONS, url, "0008")
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
                }
                for statement in filter(str.strip, SEED.split(";\n")):
                    names = set(re.findall(r"%\((\w+)\)s", statement))
                    conn.execute(statement, {k: v for k, v in params.items() if k in names})
                conn.execute("VACUUM ANALYZE deliveries")
                conn.execute("VACUUM ANALYZE delivery_attempts")
            print(
                f"{args.rows:,} deliveries and attempts written in {time.monotonic() - started:.0f} s"
            )
            measure(url, "indexes of 0008", big, ids[:PAGE], args.plans)
            upgrade(MIGRATIONS, url)
            with psycopg.connect(url.replace("+psycopg", ""), autocommit=True) as conn:
                conn.execute("VACUUM ANALYZE deliveries")
                conn.execute("VACUUM ANALYZE delivery_attempts")
            measure(url, "indexes of 0009 (head)", big, ids[:PAGE], args.plans)
        finally:
            postgres.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
