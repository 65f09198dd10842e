"""Where the shared per-host budget lives: the cost of one acquired token in each candidate
store, with 2 processes taking tokens of the same host at once on loopback (the contended
case: every run of a popular site asks the same key).

- `pg-statement`: PostgreSQL, one autocommit `INSERT ... ON CONFLICT DO UPDATE ... RETURNING`
  (the slot computed by the database, `scraper_manager.crawler.host_budget.PgHostBudget`).
- `pg-row-lock`: PostgreSQL, a transaction: `SELECT ... FOR UPDATE`, the slot computed in
  Python (`next_slot`), `UPDATE`, `COMMIT`.
- `nats-kv`: a NATS KV bucket: `get`, the slot computed in Python, `update` with the revision
  read (compare-and-set), again from `get` when another process was first.

Each process takes `--tokens` tokens with an interval of 1 µs (nobody waits: the figure is the
store's cost, not the budget's spacing). Printed: microseconds per token per process (its wall
time over its tokens), tokens per second of both together, and the CAS retries.

Run: `uv run --frozen python services/scraper-manager/bench/host_budget_store.py` (`make
bench` runs it). It starts an embedded PostgreSQL and nats-server of its own.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import nats
from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError
from scraper_manager.cli import MIGRATIONS
from scraper_manager.crawler.host_budget import PgHostBudget, next_slot
from scraper_manager.settings import Settings
from servicekit.db.admin import database_url_for, ensure_database
from servicekit.db.engine import create_engine
from servicekit.db.migrations import upgrade
from servicekit.embedded.nats import EmbeddedNats
from servicekit.embedded.postgres import EmbeddedPostgres
from sqlalchemy import text

HOST = "shop.example"
INTERVAL = 1e-6
BUCKET = "host_budgets"
APPROACHES = ("pg-statement", "pg-row-lock", "nats-kv")


async def pg_statement(url: str, tokens: int) -> dict[str, Any]:
    engine = create_engine(Settings(database_url=url, log_json=False))
    budget = PgHostBudget(engine)
    await budget.reserve(HOST, INTERVAL)  # the pool's first connection, outside the timing
    started = time.perf_counter()
    for _ in range(tokens):
        await budget.reserve(HOST, INTERVAL)
    seconds = time.perf_counter() - started
    await engine.dispose()
    return {"seconds": seconds, "retries": 0}


_LOCK = text(
    "SELECT EXTRACT(EPOCH FROM last_at), EXTRACT(EPOCH FROM now())"
    " FROM host_budgets WHERE host = :host FOR UPDATE"
)
_SET = text("UPDATE host_budgets SET last_at = to_timestamp(:slot) WHERE host = :host")


async def pg_row_lock(url: str, tokens: int) -> dict[str, Any]:
    engine = create_engine(Settings(database_url=url, log_json=False))
    await PgHostBudget(engine).reserve(HOST, INTERVAL)  # the row exists
    started = time.perf_counter()
    for _ in range(tokens):
        async with engine.begin() as connection:
            last, now = (await connection.execute(_LOCK, {"host": HOST})).one()
            slot = next_slot(float(last), float(now), INTERVAL)
            await connection.execute(_SET, {"slot": slot, "host": HOST})
    seconds = time.perf_counter() - started
    await engine.dispose()
    return {"seconds": seconds, "retries": 0}


async def nats_kv(url: str, tokens: int) -> dict[str, Any]:
    client = await nats.connect(url)
    kv = await client.jetstream().key_value(BUCKET)
    key = HOST.replace(".", "_")
    retries = 0
    started = time.perf_counter()
    for _ in range(tokens):
        while True:
            try:
                entry = await kv.get(key)
                last: float | None = float(entry.value or b"0")
                revision = entry.revision or 0
            except KeyNotFoundError:
                last, revision = None, 0
            # NATS has no clock to share: each worker's own (skewed clocks skew the slots).
            slot = next_slot(last, time.time(), INTERVAL)
            try:
                await kv.update(key, repr(slot).encode(), last=revision)
                break
            except KeyWrongLastSequenceError:
                retries += 1
    seconds = time.perf_counter() - started
    await client.close()
    return {"seconds": seconds, "retries": retries}


def child(approach: str, url: str, tokens: int) -> dict[str, Any]:
    run = {"pg-statement": pg_statement, "pg-row-lock": pg_row_lock, "nats-kv": nats_kv}
    return asyncio.run(run[approach](url, tokens))


async def make_bucket(url: str) -> None:
    client = await nats.connect(url)
    await client.jetstream().create_key_value(bucket=BUCKET, history=1)
    await client.close()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=3000)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--child", nargs=3)
    args = parser.parse_args()
    if args.child:
        approach, url, tokens = args.child
        print(json.dumps(child(approach, url, int(tokens))))
        return 0
    rows = []
    with tempfile.TemporaryDirectory(prefix="budget-bench-") as workdir:
        postgres = EmbeddedPostgres(Path(workdir) / "pg")
        broker = EmbeddedNats(Path(workdir) / "nats")
        postgres.start()
        broker.start()
        try:
            url = database_url_for(postgres.url, "scraper_manager_budget_bench")
            ensure_database(url)
            upgrade(MIGRATIONS, url)
            asyncio.run(make_bucket(broker.url))
            for approach in APPROACHES:
                target = broker.url if approach == "nats-kv" else url
                children = [
                    subprocess.Popen(
                        [sys.executable, __file__, "--child", approach, target, str(args.tokens)],
                        stdout=subprocess.PIPE,
                        text=True,
                    )
                    for _ in range(args.processes)
                ]
                results = []
                for process in children:
                    out, _ = process.communicate(timeout=600)
                    results.append(json.loads(out.strip().splitlines()[-1]))
                rows.append((approach, results))
        finally:
            broker.stop()
            postgres.stop()
    print(
        f"\nShared host budget: cost of one token, {args.processes} processes taking "
        f"{args.tokens} tokens each of one host at once (loopback)\n"
    )
    print(f"{'store':13} | {'µs/token (each process)':>24} | {'tokens/s, all':>13} | CAS retries")
    print("-" * 70)
    for approach, results in rows:
        each = " / ".join(f"{r['seconds'] / args.tokens * 1e6:.0f}" for r in results)
        total = args.tokens * len(results) / max(r["seconds"] for r in results)
        retries = sum(r["retries"] for r in results)
        print(f"{approach:13} | {each:>24} | {total:>13.0f} | {retries}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
