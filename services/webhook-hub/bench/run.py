"""`make bench` for webhook-hub: end-to-end throughput and latency on this machine.

Starts embedded PostgreSQL and NATS, a receiver on 127.0.0.1 (nginx from Debian's packages
when installed, otherwise a small aiohttp receiver) pinned to the last core, and a real
`webhook-hub worker` process; publishes events into `EVENTS` and waits until every
delivery arrives (or a bounded time passes). Prints a table. Everything stays on loopback and
stops by itself.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import nats
import psycopg
import uvloop
from servicekit.db.admin import database_url_for, ensure_database
from servicekit.db.migrations import upgrade
from servicekit.embedded.nats import EmbeddedNats
from servicekit.embedded.network import free_port, wait_for_port
from servicekit.embedded.postgres import EmbeddedPostgres
from servicekit.events import CloudEvent
from servicekit.events.stream import ensure_events_stream
from servicekit.settings import ServiceSettings
from servicekit.signing import generate_secret, webhook_headers

HERE = Path(__file__).resolve().parent
NGINX_CONF = """
worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/nginx-error.log;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_buffer_size 64k;
    keepalive_requests 1000000;
    server {{
        listen 127.0.0.1:{port};
        location / {{ return 204; }}
    }}
}}
"""
MIGRATIONS = HERE.parent / "migrations"
BIN = Path(sys.executable).parent
EVENT_TYPE = "bench.happened"
PACING_TICK_SECONDS = 0.005


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class Bench:
    def __init__(self, workdir: Path, durable: bool, python_receiver: bool) -> None:
        self.workdir = workdir
        self.python_receiver = python_receiver
        self.receiver_kind = ""
        self.postgres = EmbeddedPostgres(workdir / "pg", durable=durable)
        self.nats = EmbeddedNats(workdir / "nats")
        self.receiver_port = free_port()
        self.receiver: subprocess.Popen[bytes] | None = None
        self.workers: list[subprocess.Popen[bytes]] = []
        self.database_url = ""

    def start(self) -> None:
        self.postgres.start()
        self.nats.start()
        self.database_url = database_url_for(self.postgres.url, "webhook_hub_bench")
        ensure_database(self.database_url)
        upgrade(MIGRATIONS, self.database_url)
        cores = os.cpu_count() or 1
        nginx = shutil.which("nginx") or (
            "/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None
        )
        if nginx and not self.python_receiver:
            self.receiver_kind = "nginx"
            conf = self.workdir / "nginx.conf"
            conf.write_text(NGINX_CONF.format(port=self.receiver_port, dir=self.workdir))
            command = [nginx, "-p", str(self.workdir), "-c", str(conf), "-g", "daemon off;"]
        else:
            self.receiver_kind = "aiohttp"
            command = [sys.executable, str(HERE / "receiver.py"), str(self.receiver_port)]
        self.receiver = subprocess.Popen(
            command,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=lambda: os.sched_setaffinity(0, {cores - 1}),
        )
        wait_for_port("127.0.0.1", self.receiver_port, 30)

    def start_worker(self) -> None:
        env = {
            **os.environ,
            "WEBHOOK_HUB_DATABASE_URL": self.database_url,
            "WEBHOOK_HUB_NATS_URL": self.nats.url,
            "WEBHOOK_HUB_LOG_LEVEL": "WARNING",
            **{k: v for k, v in os.environ.items() if k.startswith("WEBHOOK_HUB_")},
        }
        self.workers.append(
            subprocess.Popen(
                [str(BIN / "webhook-hub"), "worker"],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )

    def stop(self) -> None:
        for process in (*self.workers, self.receiver):
            if process is not None and process.poll() is None:
                process.terminate()
                try:
                    process.wait(20)
                except subprocess.TimeoutExpired:
                    process.kill()
        self.nats.stop()
        self.postgres.stop()

    def subscribe(self, count: int, event_type: str) -> list[str]:
        """`count` subscriptions to `event_type`, each at its own path of the receiver. Each
        scenario has a type of its own, so nothing of an earlier one matches its events."""
        with psycopg.connect(self.database_url) as conn:
            conn.execute(
                "INSERT INTO consumers (owner, id, created_at) VALUES ('bench', %s, now())"
                " ON CONFLICT DO NOTHING",
                (uuid.uuid4(),),
            )
            consumer_id = conn.execute("SELECT id FROM consumers WHERE owner='bench'").fetchone()
            assert consumer_id is not None
            paths = []
            for n in range(count):
                path = f"/sub{n}"
                conn.execute(
                    "INSERT INTO subscriptions (id, consumer_id, owner, endpoint_url, secret,"
                    " events, is_active, headers, timeout_seconds, created_at, updated_at)"
                    " VALUES (%s, %s, 'bench', %s, %s, %s, true, '{}', 10, now(), now())",
                    (
                        uuid.uuid4(),
                        consumer_id[0],
                        f"http://127.0.0.1:{self.receiver_port}{path}",
                        generate_secret(),
                        [event_type],
                    ),
                )
                paths.append(path)
        return paths

    def succeeded_count(self, event_type: str) -> int:
        with psycopg.connect(self.database_url) as conn:
            row = conn.execute(
                "SELECT count(*) FROM deliveries WHERE event_type = %s AND status = 'succeeded'",
                (event_type,),
            ).fetchone()
        return int(row[0]) if row else 0

    def database_stats(self, event_type: str, started: float) -> dict[str, Any]:
        """What the deliveries record: successes, and receipt = attempt start + duration."""
        with psycopg.connect(self.database_url) as conn:
            row = conn.execute(
                "SELECT count(DISTINCT d.id),"
                " coalesce(extract(epoch FROM max(a.attempted_at"
                "   + a.duration_ms * interval '1 millisecond')), 0)"
                " FROM deliveries d JOIN delivery_attempts a ON a.delivery_id = d.id"
                " WHERE d.event_type = %s AND d.status = 'succeeded' AND a.status_code < 300",
                (event_type,),
            ).fetchone()
            assert row is not None
            latencies = [
                float(r[0])
                for r in conn.execute(
                    "SELECT extract(epoch FROM a.attempted_at"
                    " + a.duration_ms * interval '1 millisecond' - d.event_time)"
                    " FROM deliveries d JOIN delivery_attempts a ON a.delivery_id = d.id"
                    " WHERE d.event_type = %s AND a.status_code < 300",
                    (event_type,),
                ).fetchall()
            ]
        return {
            "distinct": int(row[0]),
            "last_at": float(row[1]) or started,
            "latencies": latencies,
        }

    def receiver_stats(self) -> dict[str, Any]:
        url = f"http://127.0.0.1:{self.receiver_port}/stats"
        with urllib.request.urlopen(url, timeout=30) as response:
            return dict(json.loads(response.read()))

    def reset_receiver(self) -> None:
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.receiver_port}/reset", method="POST"
        )
        urllib.request.urlopen(request, timeout=10).close()  # noqa: S310 (loopback)

    async def publish(
        self, events: int, rate: float | None, event_type: str
    ) -> tuple[float, float]:
        """Publish `events` (at `rate` per second, or as fast as possible); returns the
        publishing window."""
        client = await nats.connect(self.nats.url)
        js = client.jetstream()
        await ensure_events_stream(js, ServiceSettings())
        started = time.time()
        pending = []
        subject = f"events.{event_type}"
        for n in range(events):
            if rate is not None:
                # Events due within the next tick go out together, as from several producers
                # at once: one sleep and one socket write per tick instead of per event.
                due = started + n / rate
                delay = due - time.time()
                if delay > PACING_TICK_SECONDS:
                    await asyncio.sleep(delay)
            # The CloudEvent envelope, written out: the load generator shares the machine with
            # what it measures, so it should cost as little as it can.
            event_id = str(uuid.uuid4())
            now = datetime.now(UTC).isoformat()
            body = (
                f'{{"specversion":"1.0","id":"{event_id}","source":"bench",'
                f'"type":"{event_type}","time":"{now}","datacontenttype":"application/json",'
                f'"data":{{"n":{n},"sent_at":{time.time()}}}}}'
            ).encode()
            if n == 0:
                CloudEvent.from_json(body)  # the hand-written envelope is a valid one
            pending.append(await js.publish_async(subject, body, headers={"Nats-Msg-Id": event_id}))
            if len(pending) >= 2000:
                await asyncio.gather(*pending)
                pending.clear()
        await asyncio.gather(*pending)
        finished = time.time()
        await client.close()
        return started, finished

    async def scenario(
        self, name: str, events: int, subscriptions: int, rate: float | None, budget: float
    ) -> dict[str, Any]:
        event_type = f"bench.s{uuid.uuid4().hex[:8]}"
        self.subscribe(subscriptions, event_type)
        expected = events * subscriptions

        def stats_now() -> dict[str, Any]:
            if self.receiver_kind == "nginx":
                return self.database_stats(event_type, started)
            return self.receiver_stats()

        def delivered_now() -> int:
            """Progress while the run lasts: a count only, so the watching takes little of
            the machine it watches."""
            if self.receiver_kind == "nginx":
                return self.succeeded_count(event_type)
            return int(self.receiver_stats()["distinct"])

        if self.receiver_kind != "nginx":
            self.reset_receiver()
        started = time.time()
        started, published = await self.publish(events, rate, event_type)
        deadline = time.time() + budget
        # Polling another process's database: there is no event to wait on.
        while delivered_now() < expected and time.time() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(1.0)
        # Outcomes are recorded a moment after receipt: read once more for complete figures.
        await asyncio.sleep(1.0)
        stats = stats_now()
        elapsed = max(stats["last_at"] - started, 1e-9)
        result = {
            "scenario": name,
            "events": events,
            "subs": subscriptions,
            "offered_rate": rate or round(events / max(published - started, 1e-9)),
            "events_per_s": round(stats["distinct"] / subscriptions / elapsed),
            "deliveries_per_s": round(stats["distinct"] / elapsed),
            "p50_ms": round(percentile(stats["latencies"], 0.50) * 1000, 1),
            "p95_ms": round(percentile(stats["latencies"], 0.95) * 1000, 1),
            "p99_ms": round(percentile(stats["latencies"], 0.99) * 1000, 1),
            "lost": expected - stats["distinct"],
        }
        print(json.dumps(result), flush=True)
        return result

    async def bare_loop(self, requests: int, concurrency: int) -> dict[str, Any]:
        """The ceiling: sign and POST from one aiohttp session, nothing else."""
        if self.receiver_kind != "nginx":
            self.reset_receiver()
        secret = generate_secret()
        url = f"http://127.0.0.1:{self.receiver_port}/bare"
        queue: asyncio.Queue[int] = asyncio.Queue()
        for n in range(requests):
            queue.put_nowait(n)
        connector = aiohttp.TCPConnector(limit=concurrency)
        async with aiohttp.ClientSession(connector=connector) as http:

            async def sender() -> None:
                while not queue.empty():
                    n = queue.get_nowait()
                    body = json.dumps(
                        {
                            "type": EVENT_TYPE,
                            "timestamp": "2026-11-22T00:00:00Z",
                            "data": {"n": n, "sent_at": time.time()},
                        }
                    ).encode()
                    headers = {
                        "content-type": "application/json",
                        **webhook_headers(f"msg_{n}", body, [secret]),
                    }
                    async with http.post(url, data=body, headers=headers) as response:
                        await response.read()

            started = time.time()
            await asyncio.gather(*(sender() for _ in range(concurrency)))
            elapsed = time.time() - started
        return {"requests": requests, "per_s": round(requests / elapsed)}


def table(rows: list[dict[str, Any]]) -> str:
    columns = list(rows[0])
    widths = [max(len(str(c)), *(len(str(r[c])) for r in rows)) for c in columns]
    line = " | ".join(str(c).ljust(w) for c, w in zip(columns, widths, strict=True))
    out = [line, "-+-".join("-" * w for w in widths)]
    for row in rows:
        out.append(" | ".join(str(row[c]).ljust(w) for c, w in zip(columns, widths, strict=True)))
    return "\n".join(out)


async def main_async(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="webhook-hub-bench-") as workdir:
        bench = Bench(
            Path(workdir), durable=not args.unsafe_fast_db, python_receiver=args.python_receiver
        )
        try:
            bench.start()
            for _ in range(args.workers):
                bench.start_worker()
            await asyncio.sleep(3)
            rows = [
                await bench.scenario("max rate, 1 sub", args.events, 1, None, args.budget),
                await bench.scenario("max rate, 10 subs", args.events // 5, 10, None, args.budget),
                await bench.scenario("1,000/s, 1 sub", 1000 * args.seconds, 1, 1000, args.budget),
                await bench.scenario("5,000/s, 1 sub", 5000 * args.seconds, 1, 5000, args.budget),
            ]
            bare = await bench.bare_loop(args.events, 256)
            receiver = bench.receiver_kind
        finally:
            bench.stop()
    print(
        f"\nwebhook-hub benchmark on {platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, {args.workers} worker process(es), receiver {receiver}, PostgreSQL fsync {'off' if args.unsafe_fast_db else 'on'}\n"
    )
    print(table(rows))
    best = max(row["deliveries_per_s"] for row in rows[:2])
    print(
        f"\nbare aiohttp sign-and-POST loop to the same receiver: {bare['per_s']} requests/s;"
        f" engine at max rate: {best} deliveries/s = {best / bare['per_s']:.0%} of the bare loop"
    )
    lost = sum(row["lost"] for row in rows)
    print(f"events lost: {lost}")
    return 0 if lost == 0 else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20000, help="events at max rate, 1 sub")
    parser.add_argument("--seconds", type=int, default=10, help="length of fixed-rate runs")
    parser.add_argument("--budget", type=float, default=180, help="seconds to wait per scenario")
    parser.add_argument("--unsafe-fast-db", action="store_true", help="PostgreSQL without fsync")
    parser.add_argument("--workers", type=int, default=1, help="worker processes")
    parser.add_argument(
        "--python-receiver", action="store_true", help="use the aiohttp receiver even with nginx"
    )
    # uvloop, as the worker runs: the bare loop is the same machinery without the engine.
    return uvloop.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
