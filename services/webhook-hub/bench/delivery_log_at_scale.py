"""The delivery log's pages at scale (issue 31): `--rows` deliveries (default 50 million) and
their pages' answer times over HTTP, each against 100 ms at p99.

Starts embedded PostgreSQL (fsync on) and NATS as `ingest.py` does, migrates to head, and
loads the rows into the partitioned log as a month of service leaves it: the migration's
legacy partition (empty here) dropped as the maintenance drops it once expired, the day
partitions of the retention window made by the maintenance's own round
(maintenance.py `maintain`, at the settings' default width and retention), each delivery filed
under its event time (`log_time`, as the store files a delivery written when its event is
new: partitions.py `Layout.filing`) and each attempt under its own time. The rows: `--subscriptions` endpoints of `--owners` owners, half of all rows on the
measured endpoint (the bench key's owner's first: the worst case of one busy endpoint) and
the rest spread over the others, `created_at` spread evenly over the last `--days` (the
retention window, less `SLACK` so that the oldest stay inside it), a 150-byte payload, 90 % succeeded at the first attempt (held by the row,
as the engine writes them), 8 % failed and 2 % of the last 2 hours pending, those not
succeeded with a retry in `delivery_attempts`; one event in a hundred of a rare type. The
indexes and keys of both partitioned tables are dropped before the load and built again after
it (as the migrations define them on the parents, read from the catalog; building one on a
parent builds it on every partition), then VACUUM ANALYZE, as autovacuum
would have left a log written over weeks. `--method insert` loads with server-side
`INSERT ... SELECT generate_series` in chunks of `--chunk` rows on `--jobs` connections;
`--method copy` with COPY (text) from a Python generator, one chunk per connection at a time.

Then one `webhook-hub serve` process and `--requests` requests of each kind, one at a time:
the portal's endpoint page (its delivery log and charts; without filters, per status, per
type, per time range and a later page), a delivery's page, the API's delivery list (first
page and a keyset page 20 pages in) and one delivery; p50/p99 each, met or MISSED against
100 ms. The first view of the endpoint page (its charts' rollup still empty) is printed
apart: later views read the rollup. `--plans` prints EXPLAIN ANALYZE of the log's queries.
Everything stays on 127.0.0.1 and stops by itself. Disk: about 530 bytes a row.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import html
import json
import os
import platform
import re
import sys
import tempfile
import time
import urllib.parse
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import psycopg
from servicekit.db.engine import to_sqlalchemy_url
from sqlalchemy.ext.asyncio import create_async_engine
from webhook_hub.delivery_engine.maintenance import maintain
from webhook_hub.partitions import Layout
from webhook_hub.settings import Settings

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from ingest import Stack  # noqa: E402  (the bench's sibling modules)
from run import met, percentile, table  # noqa: E402

TARGET_MS = 100.0
TYPES = ["order.paid", "order.created", "invoice.paid", "invoice.failed"]
RARE_TYPE = "order.refunded"  # one event in a hundred
PAYLOAD = '{"id": "inv_1001", "total": 99.5, "currency": "EUR", "note": "' + "x" * 90 + '"}'
PENDING_HOURS = 2
TABLES = ("deliveries", "delivery_attempts")
# The layout a hub runs with by default: day partitions kept 30 days.
LAYOUT = Layout(
    Settings.model_fields["delivery_partition_width"].default,
    timedelta(days=Settings.model_fields["delivery_retention_days"].default),
)
# The oldest rows this much younger than the retention's edge: in a partition the maintenance
# keeps, and filed by their own time (not under the current partition) had they been written
# at it.
SLACK = timedelta(minutes=10)

# Row i (1-based) of the load, as SQL: its endpoint, time and outcome. `md5` of the run's seed
# and i gives the same random-looking ids to a delivery and to its attempt, chunk by chunk.
ROWS = """
SELECT i, md5(%(seed)s || i)::uuid AS id,
       CASE WHEN i %% 2 = 0 THEN %(big)s::uuid
            ELSE (%(others)s::uuid[])[1 + (i / 2) %% cardinality(%(others)s::uuid[])] END AS sid,
       %(now)s::timestamptz - (i * %(span)s::interval / %(rows)s) AS t,
       CASE WHEN i %% 100 = 0 THEN %(rare)s
            ELSE (%(types)s::text[])[1 + i %% 4] END AS event_type,
       CASE WHEN i %% 50 = 1 AND i * %(span)s::interval / %(rows)s < %(pending)s::interval
                 THEN 'pending'
            WHEN i %% 12 = 0 THEN 'failed'
            ELSE 'succeeded' END AS status,
       (20 + (i * 7919 %% 900))::int AS duration_ms
FROM generate_series(%(lo)s::bigint, %(hi)s::bigint) AS i
"""
INSERT_DELIVERIES = f"""
INSERT INTO deliveries (id, subscription_id, event_id, event_type, payload, event_time, status,
    attempts, next_attempt_at, last_attempt_at, last_status_code, created_at, completed_at,
    first_status_code, first_duration_ms, log_time)
SELECT id, sid, md5('e' || %(seed)s || i)::uuid, event_type, %(payload)s::json, t, status,
       CASE WHEN status = 'succeeded' THEN 1 ELSE 2 END,
       CASE WHEN status = 'pending' THEN %(now)s::timestamptz + interval '5 minutes' END,
       CASE WHEN status = 'succeeded' THEN t ELSE t + interval '1 minute' END,
       CASE WHEN status = 'succeeded' THEN 200 ELSE 500 END, t,
       CASE WHEN status <> 'pending' THEN t + interval '1 minute' END,
       CASE WHEN status = 'succeeded' THEN 200 ELSE 500 END, duration_ms, t
FROM ({ROWS}) AS r
"""  # noqa: S608  (the bench's own constant SQL)
INSERT_ATTEMPTS = f"""
INSERT INTO delivery_attempts (id, delivery_id, attempted_at, status_code, duration_ms)
SELECT md5('a' || %(seed)s || i)::uuid, id, t + interval '1 minute', 500, duration_ms
FROM ({ROWS}) AS r WHERE status <> 'succeeded'
"""  # noqa: S608  (the bench's own constant SQL)
# What the migrations built on both tables, to drop before the load and build after it:
# keys (primary, unique, foreign) as constraints, the other indexes as they are.
CONSTRAINTS = """
SELECT conrelid::regclass::text, conname, contype, pg_get_constraintdef(oid)
FROM pg_constraint
WHERE conrelid IN ('deliveries'::regclass, 'delivery_attempts'::regclass)
  AND contype IN ('p', 'u', 'f')
ORDER BY contype = 'f', conname
"""
INDEXES = """
SELECT i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid)
FROM pg_index i
WHERE i.indrelid IN ('deliveries'::regclass, 'delivery_attempts'::regclass)
  AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid)
"""


class Loader:
    def __init__(self, url: str, args: argparse.Namespace, big: uuid.UUID, others: list[uuid.UUID]):
        self.url = url
        self.args = args
        self.now = datetime.now(UTC)
        self.params: dict[str, Any] = {
            "seed": uuid.uuid4().hex[:8],
            "big": big,
            "others": others,
            "now": self.now,
            "span": timedelta(days=args.days) - SLACK,
            "rows": args.rows,
            "rare": RARE_TYPE,
            "types": TYPES,
            "pending": timedelta(hours=PENDING_HOURS),
            "payload": PAYLOAD,
        }

    def load(self) -> dict[str, float]:
        """The rows, with the tables' keys and indexes dropped meanwhile; seconds per phase."""
        phases: dict[str, float] = {}
        started = time.monotonic()
        with psycopg.connect(self.url, autocommit=True) as conn:
            for name in TABLES:
                # The migration's partition up to a few minutes from now (empty: the database
                # is new) would take the whole window; once expired it goes, as here.
                legacy = f"{name}_legacy"
                if conn.execute(f"SELECT EXISTS (SELECT FROM {legacy})").fetchone() != (False,):  # noqa: S608
                    raise SystemExit(f"{legacy} holds rows: load into a new database")
                conn.execute(f"DROP TABLE {legacy}")
            constraints = conn.execute(CONSTRAINTS).fetchall()
            indexes = conn.execute(INDEXES).fetchall()
            # On the parents: each drop takes the partitions' index with it.
            for table_name, name, _, _ in reversed(constraints):  # foreign keys first
                conn.execute(f'ALTER TABLE {table_name} DROP CONSTRAINT "{name}"')
            for name, _ in indexes:
                conn.execute(f"DROP INDEX {name}")
        created = asyncio.run(self.partitions())
        print(f"  {created} partitions made by the maintenance's round", flush=True)
        chunks = [
            (lo, min(lo + self.args.chunk - 1, self.args.rows))
            for lo in range(1, self.args.rows + 1, self.args.chunk)
        ]
        load = self.insert_chunk if self.args.method == "insert" else self.copy_chunk
        with concurrent.futures.ThreadPoolExecutor(self.args.jobs) as pool:
            for done, _ in enumerate(pool.map(load, chunks), 1):
                if done % max(1, len(chunks) // 10) == 0:
                    rate = done * self.args.chunk / (time.monotonic() - started)
                    print(f"  {done}/{len(chunks)} chunks, {rate:,.0f} rows/s", flush=True)
        phases["load_s"] = time.monotonic() - started
        started = time.monotonic()
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute("SET maintenance_work_mem = '1GB'")
            for _, definition in indexes:
                # The catalog gives a partitioned index as `ON ONLY` its parent (no partition's
                # index built, the parent's left invalid): built here on every partition.
                conn.execute(definition.replace(" ON ONLY ", " ON ", 1))
            for table_name, name, _, definition in constraints:
                conn.execute(f'ALTER TABLE {table_name} ADD CONSTRAINT "{name}" {definition}')
            phases["indexes_s"] = time.monotonic() - started
            started = time.monotonic()
            for name in TABLES:
                conn.execute(f"VACUUM (ANALYZE) {name}")
            phases["vacuum_s"] = time.monotonic() - started
        return phases

    async def partitions(self) -> int:
        """The maintenance's round at the load's `now`: the day partitions of the retention
        window and those ahead, of both tables."""
        engine = create_async_engine(to_sqlalchemy_url(self.url))
        try:
            done = await maintain(engine, LAYOUT, self.now)
        finally:
            await engine.dispose()
        if not done.locked or done.dropped:
            raise RuntimeError(f"unexpected maintenance round: {done}")
        return len(done.created)

    def insert_chunk(self, bounds: tuple[int, int]) -> None:
        with psycopg.connect(self.url) as conn:
            params = {**self.params, "lo": bounds[0], "hi": bounds[1]}
            conn.execute(INSERT_DELIVERIES, params)
            conn.execute(INSERT_ATTEMPTS, params)

    def copy_chunk(self, bounds: tuple[int, int]) -> None:
        attempts: list[str] = []
        with psycopg.connect(self.url) as conn, conn.cursor() as cursor:
            with cursor.copy(
                "COPY deliveries (id, subscription_id, event_id, event_type, payload, event_time,"
                " status, attempts, next_attempt_at, last_attempt_at, last_status_code,"
                " created_at, completed_at, first_status_code, first_duration_ms, log_time)"
                " FROM STDIN"
            ) as copy:
                for block in self.copy_rows(bounds, attempts):
                    copy.write(block)
            with cursor.copy(
                "COPY delivery_attempts (id, delivery_id, attempted_at, status_code, duration_ms)"
                " FROM STDIN"
            ) as copy:
                copy.write("".join(attempts))

    def copy_rows(self, bounds: tuple[int, int], attempts: list[str]) -> Iterator[str]:
        """Text COPY rows, the same as `ROWS` makes, in blocks of 10,000."""
        big, others = str(self.params["big"]), [str(o) for o in self.params["others"]]
        now = self.now.timestamp()
        step = (timedelta(days=self.args.days) - SLACK).total_seconds() / self.args.rows
        payload = PAYLOAD.replace("\\", "\\\\")
        pending_s = PENDING_HOURS * 3600
        due = datetime.fromtimestamp(now + 300, UTC)
        null = "\\N"
        block: list[str] = []
        for i in range(bounds[0], bounds[1] + 1):
            delivery = uuid.uuid4()
            sid = big if i % 2 == 0 else others[(i // 2) % len(others)]
            t = datetime.fromtimestamp(now - i * step, UTC)
            event_type = RARE_TYPE if i % 100 == 0 else TYPES[i % 4]
            if i % 50 == 1 and i * step < pending_s:
                status = "pending"
            else:
                status = "failed" if i % 12 == 0 else "succeeded"
            duration = 20 + (i * 7919 % 900)
            ok = status == "succeeded"
            after = t + timedelta(minutes=1)
            block.append(
                f"{delivery}\t{sid}\t{uuid.uuid4()}\t{event_type}\t{payload}\t{t}\t{status}\t"
                f"{1 if ok else 2}\t{due if status == 'pending' else null}\t"
                f"{t if ok else after}\t{200 if ok else 500}\t{t}\t"
                f"{after if status != 'pending' else null}\t{200 if ok else 500}\t"
                f"{duration}\t{t}\n"
            )
            if not ok:
                attempts.append(f"{uuid.uuid4()}\t{delivery}\t{after}\t500\t{duration}\n")
            if len(block) == 10_000:
                yield "".join(block)
                block = []
        if block:
            yield "".join(block)


def seed_subscriptions(url: str, owners: int, per_owner: int) -> list[uuid.UUID]:
    """`per_owner` subscriptions of each owner (the first owner is the bench key's, `bench`),
    the first of which is the measured one."""
    ids: list[uuid.UUID] = []
    with psycopg.connect(url) as conn:
        for n in range(owners):
            owner = "bench" if n == 0 else f"owner{n}"
            consumer = uuid.uuid4()
            conn.execute(
                "INSERT INTO consumers (owner, id, created_at) VALUES (%s, %s, now())",
                (owner, consumer),
            )
            for _ in range(per_owner):
                sid = uuid.uuid4()
                conn.execute(
                    "INSERT INTO subscriptions (id, consumer_id, owner, endpoint_url, secret,"
                    " events, is_active, headers, timeout_seconds, created_at, updated_at)"
                    " VALUES (%s, %s, %s, 'http://127.0.0.1:9/hook', 'c2VjcmV0c2VjcmV0',"
                    " %s, true, '{}', 10, now(), now())",
                    (sid, consumer, owner, [*TYPES, RARE_TYPE]),
                )
                ids.append(sid)
    return ids


async def sign_in(http: aiohttp.ClientSession, base: str, key: str) -> None:
    """The portal's sign-in form with the API key (its CSRF token from the form)."""
    async with http.get(f"{base}/portal/login") as response:
        page = await response.text()
    found = re.search(r'name="csrf_token" value="([^"]+)"', page)
    if found is None:
        raise RuntimeError("no CSRF token on the sign-in page")
    form = {"api_key": key, "csrf_token": html.unescape(found.group(1))}
    async with http.post(f"{base}/portal/login", data=form, allow_redirects=False) as response:
        if response.status != 303:
            raise RuntimeError(f"sign-in answered {response.status}")


async def timings(http: aiohttp.ClientSession, urls: list[str], requests: int) -> list[float]:
    """Milliseconds of each request (`urls` in turn), one at a time; any answer but 200 stops
    the run."""
    spent = []
    for n in range(requests):
        url = urls[n % len(urls)]
        began = time.perf_counter()
        async with http.get(url) as response:
            await response.read()
            if response.status != 200:
                raise RuntimeError(f"{url} answered {response.status}")
        spent.append((time.perf_counter() - began) * 1000)
    return spent


async def measure(stack: Stack, big: uuid.UUID, args: argparse.Namespace) -> list[dict[str, Any]]:
    base = stack.url
    api = {"Authorization": f"Bearer {stack.key}"}
    with psycopg.connect(stack.database_url) as conn:
        # Deliveries of the measured endpoint from all over the window, one in ten not
        # succeeded (with an attempt in the log).
        sample = conn.execute(
            "SELECT id FROM deliveries TABLESAMPLE SYSTEM (1) WHERE subscription_id = %s"
            " ORDER BY status = 'succeeded', random() LIMIT %s",
            (big, args.requests),
        ).fetchall()
    ids = [str(row[0]) for row in sample]
    ten_days_ago = datetime.now(UTC) - timedelta(days=min(10, args.days / 2))
    window = {
        "from": ten_days_ago.strftime("%Y-%m-%dT%H:%M"),
        "to": (ten_days_ago + timedelta(hours=6)).strftime("%Y-%m-%dT%H:%M"),
    }
    endpoint = f"{base}/portal/endpoints/{big}"
    listing = f"{base}/webhooks/subscriptions/{big}/deliveries"
    jar = aiohttp.CookieJar(unsafe=True)  # cookies of 127.0.0.1
    rows: list[dict[str, Any]] = []
    async with aiohttp.ClientSession(cookie_jar=jar) as http:
        await sign_in(http, base, stack.key)
        cold = await timings(http, [endpoint], 1)
        print(
            f"endpoint page, first view (the charts' rollup empty unless --keep reused it): {cold[0]:.0f} ms",
            flush=True,
        )
        cursor = None
        async with aiohttp.ClientSession(headers=api) as keyed:
            for _ in range(20):
                query = f"?cursor={urllib.parse.quote(cursor)}" if cursor else ""
                async with keyed.get(f"{listing}{query}") as response:
                    cursor = (await response.json())["next_cursor"]
            later = f"?cursor={urllib.parse.quote(str(cursor))}"
            plan: list[tuple[str, aiohttp.ClientSession, list[str]]] = [
                ("portal: endpoint page (log + charts)", http, [endpoint]),
                ("portal: endpoint page, status=failed", http, [f"{endpoint}?status=failed"]),
                (
                    f"portal: endpoint page, event_type={RARE_TYPE} (1 %)",
                    http,
                    [f"{endpoint}?event_type={RARE_TYPE}"],
                ),
                (
                    "portal: endpoint page, a 6 h time range",
                    http,
                    [f"{endpoint}?{urllib.parse.urlencode(window)}"],
                ),
                ("portal: endpoint page, page 21", http, [f"{endpoint}{later}"]),
                ("portal: a delivery's page", http, [f"{base}/portal/deliveries/{i}" for i in ids]),
                ("API: GET .../deliveries, first page", keyed, [listing]),
                ("API: GET .../deliveries, page 21", keyed, [f"{listing}{later}"]),
                (
                    "API: GET /webhooks/deliveries/{id}",
                    keyed,
                    [f"{base}/webhooks/deliveries/{i}" for i in ids],
                ),
            ]
            for name, session, urls in plan:
                await timings(session, urls, 5)  # the process's first requests of the kind
                spent = await timings(session, urls, args.requests)
                p99 = percentile(spent, 0.99)
                row = {
                    "request": name,
                    "p50_ms": round(percentile(spent, 0.5), 1),
                    "p99_ms": round(p99, 1),
                    "max_ms": round(max(spent), 1),
                    "target": f"p99 < {TARGET_MS:.0f} ms: {met(p99 < TARGET_MS)}",
                }
                rows.append(row)
                print(row, flush=True)
    return rows


def explain_slow_statements(url: str, threshold_ms: float) -> None:
    """The plans of the statements that take longer than `threshold_ms`, with their actual
    rows and buffers, in PostgreSQL's log (auto_explain, in every new session)."""
    with psycopg.connect(url, autocommit=True) as conn:
        database = conn.info.dbname
        for setting, value in (
            ("session_preload_libraries", "auto_explain"),
            ("auto_explain.log_min_duration", f"{threshold_ms}ms"),
            ("auto_explain.log_analyze", "on"),
            ("auto_explain.log_buffers", "on"),
        ):
            conn.execute(f"ALTER DATABASE \"{database}\" SET {setting} = '{value}'")


def print_plans(log: Path) -> None:
    """auto_explain's entries of PostgreSQL's log: each slow statement's plan."""
    text = log.read_text(errors="replace")
    entries = [e for e in re.split(r"\n(?=\S)", text) if "plan:" in e]
    print(f"\n{len(entries)} statements over the --plans threshold")
    for entry in entries[:20]:
        print(entry, "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=50_000_000, help="deliveries loaded")
    parser.add_argument("--days", type=float, default=30, help="the window they span")
    parser.add_argument("--owners", type=int, default=4)
    parser.add_argument("--subscriptions", type=int, default=5, help="per owner")
    parser.add_argument("--method", choices=("insert", "copy"), default="insert")
    parser.add_argument("--chunk", type=int, default=1_000_000, help="rows per statement")
    parser.add_argument("--jobs", type=int, default=2, help="connections loading at once")
    parser.add_argument("--requests", type=int, default=200, help="requests of each kind")
    parser.add_argument("--workdir", type=Path, help="where PostgreSQL's data goes (a temp dir)")
    parser.add_argument(
        "--keep",
        type=Path,
        help="PostgreSQL's data goes to this folder and stays; a later run with the same folder"
        " and load options measures again without loading",
    )
    parser.add_argument("--load-only", action="store_true", help="load, print, stop")
    parser.add_argument(
        "--plans", type=float, help="print the plans of statements slower than this many ms"
    )
    args = parser.parse_args()
    if timedelta(days=args.days) > LAYOUT.retention:
        parser.error(f"--days beyond the retention ({LAYOUT.retention.days} days)")
    load_before = os.getloadavg()
    folder: contextlib.AbstractContextManager[str] = (
        contextlib.nullcontext(str(args.keep))
        if args.keep
        else tempfile.TemporaryDirectory(prefix="webhook-hub-log-", dir=args.workdir)
    )
    with folder as workdir:
        Path(workdir).mkdir(parents=True, exist_ok=True)
        stack = Stack(Path(workdir))
        marker = Path(workdir) / "loaded.json"
        load = {k: vars(args)[k] for k in ("rows", "days", "owners", "subscriptions")}
        try:
            stack.start(worker=False)
            url = stack.database_url
            kept = json.loads(marker.read_text()) if marker.exists() else None
            if kept is not None:
                if kept["load"] != load:
                    raise SystemExit(f"{workdir} holds another load ({kept['load']}): remove it")
                big = uuid.UUID(kept["big"])
                # Nothing was written since: the hours after the load are empty, so the charts'
                # current hour costs less than it would in service.
                age = (datetime.now(UTC) - datetime.fromisoformat(kept["at"])).total_seconds()
                print(f"reusing the load of {age / 60:.0f} min ago in {workdir}", flush=True)
            else:
                ids = seed_subscriptions(url, args.owners, args.subscriptions)
                big = ids[0]
                print(
                    f"loading {args.rows:,} deliveries ({args.method}, {args.jobs} jobs)",
                    flush=True,
                )
                phases = Loader(url, args, big, ids[1:]).load()
                with psycopg.connect(url) as conn:
                    size = conn.execute("SELECT pg_database_size(current_database())").fetchone()
                assert size is not None
                print(
                    f"loaded in {phases['load_s']:.0f} s ({args.rows / phases['load_s']:,.0f}"
                    f" rows/s), indexes and keys {phases['indexes_s']:.0f} s, vacuum"
                    f" {phases['vacuum_s']:.0f} s; database {size[0] / 1e9:.1f} GB",
                    flush=True,
                )
                if args.keep:
                    at = datetime.now(UTC).isoformat()
                    marker.write_text(json.dumps({"load": load, "big": str(big), "at": at}))
            if args.load_only:
                return 0
            if args.plans is not None:
                explain_slow_statements(url, args.plans)
            stack.start_servers(1)
            rows = asyncio.run(measure(stack, big, args))
            if args.plans is not None:
                print_plans(stack.postgres.log_path)
        finally:
            stack.stop()
    print(
        f"\nwebhook-hub delivery log at {args.rows:,} rows ({args.rows // 2:,} on the measured "
        f"endpoint, {args.owners * args.subscriptions} endpoints, {args.days:g} days) on "
        f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"1 API process, requests one at a time; load average before {load_before[0]:.2f}, "
        f"after {os.getloadavg()[0]:.2f} (1 min)\n"
    )
    print(table(rows))
    return 0 if all("met" in row["target"] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
