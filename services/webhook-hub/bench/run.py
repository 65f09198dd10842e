"""`make bench` for webhook-hub: end-to-end throughput and latency on this machine.

Starts embedded PostgreSQL and NATS, a receiver on 127.0.0.1 (nginx from Debian's packages
when installed, otherwise a small aiohttp receiver) pinned to the last core, and real
`webhook-hub worker` processes. Two kinds of scenario: a drain (events published while fresh
workers wait on the paused dispatch consumer, so neither the load generator's cost nor the
workers' start-up is in the measured path; the consumer then resumes and the workers empty
the backlog) and publish-while-delivering (at full speed or a fixed rate).
Each row has the rate, publication-to-receipt latency, first-attempt success, lost and
duplicate `webhook-id`s, the CPU the product's processes (workers, PostgreSQL, NATS) spent
per delivered event, and `ref_us`: the CPU per request of the bare http1 loop run just
before the scenario (the machine's pace then; the same code's figures move with it). Then
the same drain and 1,000/s rows again with tracing on (OpenTelemetry at 10 % sampling,
exported over OTLP/HTTP to a sink in this process), to print what tracing costs; the rows
above run with no `OTEL_*` variable, as a default install does. Then the bare sign-and-POST
loops of aiohttp, of pyreqwest (the sender before) and of `http1` (the engine's sender) to
the same receiver, in the same run. Then the slow-receiver scenarios (issue 31, "no
cliff"): 200 subscriptions whose receivers answer in 50 to 300 ms, the same slow load with
and without deliveries set aside, and a receiver down for a minute and back; and the issue's
targets, each printed met or MISSED. Everything stays on loopback and stops by itself.
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
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import nats
import nats.js.errors
import psutil
import psycopg
import uvloop
from aiohttp import web
from nats.aio.msg import Msg
from servicekit.db.admin import database_url_for, ensure_database
from servicekit.db.migrations import upgrade
from servicekit.embedded.nats import EmbeddedNats
from servicekit.embedded.network import free_port, wait_for_port
from servicekit.embedded.postgres import EmbeddedPostgres
from servicekit.events import CloudEvent, new_event_id
from servicekit.events.stream import ensure_events_stream
from servicekit.settings import ServiceSettings
from servicekit.signing import generate_secret
from webhook_hub.dispatch.loop import DISPATCH_CONSUMER

HERE = Path(__file__).resolve().parent
NGINX_CONF = """
worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/nginx-error.log;
events {{ worker_connections 4096; }}
http {{
    # Each request's webhook-id, to count duplicates as the receiver sees them.
    log_format ids '$http_webhook_id';
    access_log {dir}/ids.log ids buffer=256k flush=1s;
    client_body_buffer_size 64k;
    keepalive_requests 1000000;
    server {{
        listen 127.0.0.1:{port};
        location / {{ return 204; }}
        # The bare loops' requests: not deliveries, so not in the ids counted.
        location /bare {{ access_log off; return 204; }}
    }}
}}
"""
MIGRATIONS = HERE.parent / "migrations"
BIN = Path(sys.executable).parent
PACING_TICK_SECONDS = 0.005
PUBLISH_WINDOW = 2000
# Run again with tracing on: the backlog (CPU per event) and a steady rate (latency).
TRACED_SCENARIOS = ("drain, 1 sub", "1,000/s, 1 sub")
# Requests of the reference loop run before each scenario (about 0.2 s of one core).
REFERENCE_REQUESTS = 5000
# Events a drain's fresh workers deliver before its backlog is released, so the backlog is
# measured on warm workers: their first batches open connections (to PostgreSQL and to the
# receiver, 64 a worker), prepare statements and load code, 40 to 60 ms of the product's CPU
# all told (a drain of 200 events cost 80 ms, one of 1,000 cost 140), which a worker pays
# once in its life and a 20,000-event drain would have spread as 2 to 3 µs per event.
WARMUP_EVENTS = 1000
sys.path.insert(0, str(HERE))
from bare import LOOPS  # noqa: E402  (the bench's sibling module, not a package)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# The 2xx answers to deliveries of one event type (`%(type)s`): whether the delivery ended
# succeeded, the attempt's start, its receipt (start + duration) and the time from the event to
# it, in seconds. First attempts made from events are held by their deliveries' rows
# (migration 0014), the others are rows of the attempt log.
SUCCESSFUL_ATTEMPTS = """
WITH a AS (
    SELECT id AS delivery_id, created_at AS attempted_at, first_status_code AS status_code,
           first_duration_ms AS duration_ms
    FROM deliveries WHERE event_type = %(type)s AND first_duration_ms IS NOT NULL
    UNION ALL
    SELECT l.delivery_id, l.attempted_at, l.status_code, l.duration_ms
    FROM delivery_attempts l JOIN deliveries d ON d.id = l.delivery_id
    WHERE d.event_type = %(type)s
)
SELECT d.id, d.status = 'succeeded', extract(epoch FROM a.attempted_at),
       extract(epoch FROM a.attempted_at + a.duration_ms * interval '1 millisecond'),
       extract(epoch FROM a.attempted_at + a.duration_ms * interval '1 millisecond'
                          - d.event_time)
FROM deliveries d JOIN a ON a.delivery_id = d.id
WHERE a.status_code < 300
"""


class ProcessCpu:
    """CPU seconds (user + system) of the product's processes, per group, from psutil."""

    def __init__(self, groups: dict[str, list[int]]) -> None:
        self.groups = groups

    def snapshot(self) -> dict[str, dict[int, float]]:
        taken: dict[str, dict[int, float]] = {}
        for group, pids in self.groups.items():
            seen: dict[int, float] = {}
            for pid in pids:
                try:
                    root = psutil.Process(pid)
                    for process in (root, *root.children(recursive=True)):
                        times = process.cpu_times()
                        seen[process.pid] = times.user + times.system
                except psutil.Error:
                    continue  # gone meanwhile
            taken[group] = seen
        return taken

    @staticmethod
    def spent(
        before: dict[str, dict[int, float]], after: dict[str, dict[int, float]]
    ) -> dict[str, float]:
        """Seconds per group between two snapshots (processes started since count from 0)."""
        return {
            group: sum(t - before.get(group, {}).get(pid, 0.0) for pid, t in now.items())
            for group, now in after.items()
        }


class Bench:
    def __init__(
        self, workdir: Path, durable: bool, python_receiver: bool, profile: Path | None = None
    ) -> None:
        self.workdir = workdir
        self.profile = profile
        self.python_receiver = python_receiver
        self.receiver_kind = ""
        self.postgres = EmbeddedPostgres(workdir / "pg", durable=durable)
        self.nats = EmbeddedNats(workdir / "nats")
        self.receiver_port = free_port()
        self.receiver: subprocess.Popen[bytes] | None = None
        self.workers: list[subprocess.Popen[bytes]] = []
        self.worker_logs: list[Path] = []
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

    def cpu(self) -> ProcessCpu:
        return ProcessCpu(
            {
                "workers": [w.pid for w in self.workers if w.poll() is None],
                "postgres": [self.postgres.pid] if self.postgres.pid else [],
                "nats": [self.nats.pid] if self.nats.pid else [],
            }
        )

    def stop_workers(self) -> None:
        for process in self.workers:
            process.terminate()
        for process in self.workers:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
        self.workers = []

    @property
    def bare_url(self) -> str:
        """Where the bare loops post: a path neither receiver counts as a delivery."""
        return f"http://127.0.0.1:{self.receiver_port}/bare"

    def receiver_ids(self) -> list[str]:
        """The webhook-ids nginx has logged so far (flushed every second)."""
        log = self.workdir / "ids.log"
        return log.read_text().split() if log.exists() else []

    def start_worker(self, tracing: dict[str, str] | None = None) -> None:
        """A worker process; with `tracing`, those `OTEL_*` variables and no others."""
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("OTEL_")},
            "WEBHOOK_HUB_DATABASE_URL": self.database_url,
            "WEBHOOK_HUB_NATS_URL": self.nats.url,
            "WEBHOOK_HUB_LOG_LEVEL": "WARNING",
            **{k: v for k, v in os.environ.items() if k.startswith("WEBHOOK_HUB_")},
            **(tracing or {}),
        }
        # Warnings and errors (the log level above) kept, so a failing run can say why.
        log = (self.workdir / f"worker-{len(self.worker_logs)}.log").open("wb")
        self.worker_logs.append(Path(log.name))
        with log:
            worker = subprocess.Popen(
                [str(BIN / "webhook-hub"), "worker"],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self.workers.append(worker)
        if self.profile is not None:
            # Sampled stacks, collapsed (one line per stack with its count): py-spy writes
            # them when the worker ends.
            self.profile.mkdir(parents=True, exist_ok=True)
            out = self.profile / f"worker-{worker.pid}.txt"
            sampler = ["py-spy", "record", "--format", "raw", "-r", "100", "-o", str(out)]
            subprocess.Popen(
                [*sampler, "--pid", str(worker.pid)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )

    async def dispatch_paused(self, paused: bool) -> None:
        """Pause or resume the dispatch consumer (JetStream's consumer pause): the workers'
        pull requests wait, unanswered, while it is paused."""
        client = await nats.connect(self.nats.url)
        try:
            js = client.jetstream()
            stream = ServiceSettings().events_stream
            if paused:
                until = datetime.now(UTC) + timedelta(hours=1)
                await js.pause_consumer(stream, DISPATCH_CONSUMER, until.isoformat())
            else:
                await js.resume_consumer(stream, DISPATCH_CONSUMER)
        finally:
            await client.close()

    async def workers_waiting(self, count: int, timeout: float = 60.0) -> None:
        """Until `count` workers wait on the dispatch consumer (each holds a pull request;
        with 0, until none does): a scenario that starts before then measures the workers'
        start-up (imports, connections) as delivery latency and cost."""
        client = await nats.connect(self.nats.url)
        try:
            js = client.jetstream()
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                try:
                    info = await js.consumer_info(
                        ServiceSettings().events_stream, DISPATCH_CONSUMER
                    )
                    waiting = info.num_waiting or 0
                    if (waiting >= count) if count else (waiting == 0):
                        return
                except nats.js.errors.NotFoundError:
                    if not count:
                        return
                    # not created yet: the first worker makes it
                await asyncio.sleep(0.2)
        finally:
            await client.close()

    async def warm_up(self) -> float:
        """`WARMUP_EVENTS` delivered through the workers (to the receiver's uncounted path),
        until all are acknowledged; the CPU seconds they cost the product's processes."""
        event_type = f"bench.w{uuid.uuid4().hex[:8]}"
        self.subscribe(1, event_type, path="/bare")
        cpu = self.cpu()
        before = cpu.snapshot()
        await self.publish(WARMUP_EVENTS, None, event_type)
        await self.settled(0, lambda: 0, time.time() + 60)
        return sum(cpu.spent(before, cpu.snapshot()).values())

    async def settled(
        self, expected: int, delivered_now: Callable[[], int], deadline: float
    ) -> None:
        """Until every event is acknowledged (dispatched, its deliveries stored) and
        `expected` deliveries are recorded as received, or `deadline` (wall clock). NATS is
        asked often (a consumer-info request costs its server a few µs), the receiver or the
        database only once NATS has nothing in hand: the window closes within 50 ms of the
        work's end, and the watching adds next to nothing to the CPU it measures (polling
        the database each second cost it a connection and a count per second, and left up to
        a second of idle workers inside the window)."""
        client = await nats.connect(self.nats.url)
        try:
            js = client.jetstream()
            stream = ServiceSettings().events_stream
            while time.time() < deadline:
                info = await js.consumer_info(stream, DISPATCH_CONSUMER)
                if not info.num_pending and not info.num_ack_pending:
                    if delivered_now() >= expected:
                        return
                    await asyncio.sleep(0.25)  # acknowledged, some set aside: retried later
                    continue
                await asyncio.sleep(0.05)
        finally:
            await client.close()

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

    def subscribe(self, count: int, event_type: str, path: str = "/sub") -> list[str]:
        """`count` subscriptions to `event_type`, each at its own path of the receiver (`path`
        and its number; `/bare` for deliveries no receiver counts). Each scenario has a type
        of its own, so nothing of an earlier one matches its events."""
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
                at = path if path == "/bare" else f"{path}{n}"
                conn.execute(
                    "INSERT INTO subscriptions (id, consumer_id, owner, endpoint_url, secret,"
                    " events, is_active, headers, timeout_seconds, created_at, updated_at)"
                    " VALUES (%s, %s, 'bench', %s, %s, %s, true, '{}', 10, now(), now())",
                    (
                        uuid.uuid4(),
                        consumer_id[0],
                        f"http://127.0.0.1:{self.receiver_port}{at}",
                        generate_secret(),
                        [event_type],
                    ),
                )
                paths.append(at)
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
            answered = conn.execute(SUCCESSFUL_ATTEMPTS, {"type": event_type}).fetchall()
            first = conn.execute(
                "SELECT count(*) FILTER (WHERE status = 'succeeded' AND attempts = 1), count(*),"
                " count(*) FILTER (WHERE first_duration_ms IS NULL)"
                " FROM deliveries WHERE event_type = %s",
                (event_type,),
            ).fetchone()
            assert first is not None
        # Of deliveries that succeeded in the end: which, when first tried, when last received.
        settled = [row for row in answered if row[1]]
        return {
            "distinct": len({row[0] for row in settled}),
            "last_at": max((float(row[3]) for row in settled), default=0.0) or started,
            "first_at": min((float(row[2]) for row in settled), default=0.0) or started,
            "successes": len(settled),
            "first_attempt_ok": int(first[0]),
            "stored": int(first[1]),
            # Stored pending before their first attempt (they waited too long in a queue) and
            # sent by the claim loop: the engine's slower path.
            "set_aside": int(first[2]),
            "latencies": [float(row[4]) for row in answered],
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
        self, events: int, rate: float | None, event_type: str, types: list[str] | None = None
    ) -> tuple[float, float]:
        """Publish `events` (at `rate` per second, or as fast as possible); returns the
        publishing window. Each is a JetStream publish with its acknowledgement, as the
        services' outbox relays publish; the acknowledgements are counted by one callback
        rather than awaited as a future each (nats-py's `publish_async`), which cost the
        load generator 39 µs of CPU per event against 21, on the machine it measures. With
        `types`, event n is of type `types[n % len(types)]` (`event_type` is not used)."""
        client = await nats.connect(self.nats.url)
        js = client.jetstream()
        await ensure_events_stream(js, ServiceSettings())
        acknowledged = 0
        refused: list[bytes] = []
        all_acknowledged = asyncio.Event()

        async def on_ack(msg: Msg) -> None:
            nonlocal acknowledged
            acknowledged += 1
            if b'"error"' in msg.data:
                refused.append(msg.data)
            if acknowledged >= events:
                all_acknowledged.set()

        inbox = client.new_inbox()
        await client.subscribe(f"{inbox}.*", cb=on_ack)
        started = time.time()
        kinds = types or [event_type]
        for n in range(events):
            event_type = kinds[n % len(kinds)]
            subject = f"events.{event_type}"
            if rate is not None:
                # Events due within the next tick go out together, as from several producers
                # at once: one sleep and one socket write per tick instead of per event.
                due = started + n / rate
                delay = due - time.time()
                if delay > PACING_TICK_SECONDS:
                    await asyncio.sleep(delay)
            # The CloudEvent envelope, written out: the load generator shares the machine with
            # what it measures, so it should cost as little as it can.
            # Numbered as servicekit's producers number events (time-ordered UUIDv7s).
            event_id = str(new_event_id())
            now = datetime.now(UTC).isoformat()
            body = (
                f'{{"specversion":"1.0","id":"{event_id}","source":"bench",'
                f'"type":"{event_type}","time":"{now}","datacontenttype":"application/json",'
                f'"data":{{"n":{n},"sent_at":{time.time()}}}}}'
            ).encode()
            if n == 0:
                CloudEvent.from_json(body)  # the hand-written envelope is a valid one
            await client.publish(
                subject, body, reply=f"{inbox}.{n}", headers={"Nats-Msg-Id": event_id}
            )
            # At most this many unacknowledged, as publish_async's window was.
            while n - acknowledged >= PUBLISH_WINDOW:  # noqa: ASYNC110
                await asyncio.sleep(0.001)
        await asyncio.wait_for(all_acknowledged.wait(), 60)
        finished = time.time()
        await client.close()
        if refused:
            raise RuntimeError(f"{len(refused)} events refused by JetStream: {refused[0]!r}")
        return started, finished

    async def scenario(
        self,
        name: str,
        events: int,
        subscriptions: int,
        rate: float | None,
        budget: float,
        *,
        drain: bool = False,
        workers: int = 1,
        tracing: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """Publish `events` for `subscriptions` subscriptions and wait for every delivery. A
        drain publishes them all while the dispatch consumer is paused and measures from its
        resumption on; otherwise the workers run while the events are published."""
        event_type = f"bench.s{uuid.uuid4().hex[:8]}"
        self.subscribe(subscriptions, event_type)
        expected = events * subscriptions
        ids_before = len(self.receiver_ids())

        def delivered_now() -> int:
            """Progress while the run lasts: a count only, so the watching takes little of
            the machine it watches."""
            if self.receiver_kind == "nginx":
                return self.succeeded_count(event_type)
            return int(self.receiver_stats()["distinct"])

        if self.receiver_kind != "nginx":
            self.reset_receiver()
        warmup = 0.0
        if drain:
            # Fresh workers, started and waiting before the backlog is published on the
            # paused consumer: the backlog is there for all of them at once when it resumes,
            # and their start-up (imports, connections) is not measured. Started after the
            # publication instead, the first worker up took most of the backlog while the
            # other still imported, whose start-up CPU then counted as delivering's.
            self.stop_workers()
            # A stopped worker's pull request is counted as waiting until it expires: the
            # new workers are waiting only once those are gone.
            await self.workers_waiting(0)
            for _ in range(workers):
                self.start_worker(tracing)
            await self.workers_waiting(workers)
            warmup = await self.warm_up()
            await self.dispatch_paused(True)
        # The machine's pace just before, on work of the same kind as the engine's: the CPU per
        # request of the bare http1 loop (in this process, the workers idle). Figures of the
        # same code move with it from one run to the next.
        reference = await LOOPS["http1"](self.bare_url, REFERENCE_REQUESTS, 64)
        started = time.time()
        cpu = self.cpu()
        before = cpu.snapshot()
        machine, window = psutil.cpu_times(), time.monotonic()
        try:
            started, published = await self.publish(events, rate, event_type)
        except BaseException:
            if drain:  # the later scenarios need the consumer
                await self.dispatch_paused(False)
            raise
        if drain:
            cpu = self.cpu()
            before = cpu.snapshot()
            machine, window = psutil.cpu_times(), time.monotonic()
            await self.dispatch_paused(False)
        await self.settled(expected, delivered_now, time.time() + budget)
        spent = cpu.spent(before, cpu.snapshot())
        # Time the hypervisor gave this VM's cores to others meanwhile: a busy neighbour
        # slows every process here alike, and shows in no figure of ours but this one.
        stolen = psutil.cpu_times().steal - machine.steal
        steal = 100 * stolen / ((time.monotonic() - window) * (os.cpu_count() or 1))
        # Outcomes are recorded a moment after receipt: read once more for complete figures.
        await asyncio.sleep(1.5)
        stats = self.database_stats(event_type, started)
        if self.receiver_kind == "nginx":
            ids = self.receiver_ids()[ids_before:]
            duplicates = len(ids) - len(set(ids))
        else:
            received = self.receiver_stats()
            duplicates = int(received["posts"]) - int(received["distinct"])
            stats["latencies"] = received["latencies"]
        window_start = stats["first_at"] if drain else started
        elapsed = max(stats["last_at"] - window_start, 1e-9)
        measured = max(stats["distinct"], 1)
        result = {
            "scenario": name,
            "events": events,
            "subs": subscriptions,
            "offered_rate": "backlog"
            if drain
            else rate or round(events / max(published - started, 1e-9)),
            "events_per_s": round(stats["distinct"] / subscriptions / elapsed),
            "deliveries_per_s": round(stats["distinct"] / elapsed),
            "p50_ms": round(percentile(stats["latencies"], 0.50) * 1000, 1),
            "p99_ms": round(percentile(stats["latencies"], 0.99) * 1000, 1),
            "first_ok_%": round(100 * stats["first_attempt_ok"] / max(stats["stored"], 1), 2),
            "lost": expected - stats["distinct"],
            "dup_ids": duplicates,
            "set_aside": stats["set_aside"],
            **{
                f"cpu_us_{group}": round(seconds / measured * 1e6)
                for group, seconds in spent.items()
            },
            "cpu_us_total": round(sum(spent.values()) / measured * 1e6),
            "steal_%": round(steal, 1),
            "ref_us": reference["cpu_us"],
            # The drain's warm-up, outside its figures (`WARMUP_EVENTS`): the product's CPU.
            "warmup_ms": round(warmup * 1000) if drain else "-",
        }
        print(json.dumps(result), flush=True)
        if result["lost"]:
            self.print_worker_logs()
        return result

    def print_worker_logs(self, lines: int = 20) -> None:
        """The last warnings and errors of each worker (the work folder goes with the run)."""
        for log in self.worker_logs:
            tail = log.read_text(errors="replace").splitlines()[-lines:]
            if tail:
                print(f"--- {log.name}, last {len(tail)} lines", *tail, sep="\n", flush=True)

    async def bare_loops(self, requests: int, concurrency: int) -> dict[str, dict[str, Any]]:
        """The ceilings: sign and POST with each client, nothing else, to the same receiver."""
        loops = {}
        for name, loop in LOOPS.items():
            loops[name] = await loop(self.bare_url, requests, concurrency)
            print(name, json.dumps(loops[name]), flush=True)
        return loops

    def subscribe_each(self, targets: list[tuple[str, str]]) -> None:
        """A subscription per (endpoint URL, event type)."""
        with psycopg.connect(self.database_url) as conn:
            conn.execute(
                "INSERT INTO consumers (owner, id, created_at) VALUES ('bench', %s, now())"
                " ON CONFLICT DO NOTHING",
                (uuid.uuid4(),),
            )
            consumer_id = conn.execute("SELECT id FROM consumers WHERE owner='bench'").fetchone()
            assert consumer_id is not None
            with conn.cursor() as cursor:
                cursor.executemany(
                    "INSERT INTO subscriptions (id, consumer_id, owner, endpoint_url, secret,"
                    " events, is_active, headers, timeout_seconds, created_at, updated_at)"
                    " VALUES (%s, %s, 'bench', %s, %s, %s, true, '{}', 10, now(), now())",
                    [
                        (uuid.uuid4(), consumer_id[0], url, generate_secret(), [event_type])
                        for url, event_type in targets
                    ],
                )

    def prefix_stats(self, prefix: str) -> dict[str, int]:
        """What the deliveries of the event types under `prefix` record."""
        with psycopg.connect(self.database_url) as conn:
            row = conn.execute(
                "SELECT count(*), count(*) FILTER (WHERE first_duration_ms IS NULL),"
                " count(*) FILTER (WHERE status = 'succeeded' AND attempts = 1)"
                " FROM deliveries WHERE event_type LIKE %s",
                (prefix + ".%",),
            ).fetchone()
        assert row is not None
        return {"stored": int(row[0]), "set_aside": int(row[1]), "first_ok": int(row[2])}

    async def until_received(
        self, receivers: list[SlowReceivers], expected: int, deadline: float
    ) -> None:
        """Until the receivers have `expected` distinct deliveries, or `deadline`; asked each
        second (a count, next to nothing for the receiver)."""
        while time.time() < deadline:
            counts = await asyncio.gather(*(asyncio.to_thread(r.distinct) for r in receivers))
            if sum(counts) >= expected:
                return
            await asyncio.sleep(1)

    async def slow_receivers(
        self, subscriptions: int, ports: int, rate: int, seconds: int, budget: float
    ) -> dict[str, Any]:
        """`subscriptions` subscriptions, each to an event type of its own and a path of its
        own on one of `ports` receiver ports that answer in 50 to 300 ms; `rate` events per
        second for `seconds`, spread evenly over the types (one delivery per event)."""
        prefix = f"bench.l{uuid.uuid4().hex[:8]}"
        types = [f"{prefix}.r{i}" for i in range(subscriptions)]
        receiver = SlowReceivers(self.workdir, [free_port() for _ in range(ports)], 50, 300)
        receiver.start()
        self.subscribe_each(
            [
                (f"http://127.0.0.1:{receiver.ports[i % ports]}/sub{i}", types[i])
                for i in range(subscriptions)
            ]
        )
        events = rate * seconds
        cpu = self.cpu()
        before = cpu.snapshot()
        try:
            started, _ = await self.publish(events, rate, types[0], types)
            await self.until_received([receiver], events, time.time() + budget)
            spent = cpu.spent(before, cpu.snapshot())
        finally:
            receiver.stop()
        await asyncio.sleep(1.5)  # outcomes are recorded a moment after receipt
        stats = self.prefix_stats(prefix)
        first = first_receipts(receiver.records)
        latencies = [arrived - sent for _, _, sent, arrived, _ in receiver.records]
        answered = [end - sent for _, _, sent, _, end in receiver.records]
        last = max((arrived for _, arrived in first.values()), default=started)
        delivered = len(first)
        row = {
            "scenario": f"slow receivers, {subscriptions} subs",
            "offered_per_s": rate,
            "seconds": seconds,
            "delivered_per_s": round(delivered / max(last - started, 1e-9)),
            "p50_ms": round(percentile(latencies, 0.50) * 1000, 1),
            "p99_ms": round(percentile(latencies, 0.99) * 1000, 1),
            # To the receiver's answer (its wait included): what the sender waits for.
            "p99_answer_ms": round(percentile(answered, 0.99) * 1000, 1),
            "lost": events - delivered,
            "dup": len(receiver.records) - delivered,
            "set_aside": stats["set_aside"],
            "first_ok_%": round(100 * stats["first_ok"] / max(stats["stored"], 1), 2),
            **{f"cpu_us_{group}": round(s / max(delivered, 1) * 1e6) for group, s in spent.items()},
            "cpu_us_total": round(sum(spent.values()) / max(delivered, 1) * 1e6),
        }
        print(json.dumps(row), flush=True)
        return row

    async def receiver_down(
        self,
        subscriptions: int,
        rate: int,
        before: int,
        down: int,
        after: int,
        budget: float,
    ) -> dict[str, Any]:
        """`subscriptions` subscriptions (a type each, `rate` events per second spread over
        them), receivers answering at once; `before` seconds in, the first subscription's
        receiver stops (its process ends: connections refused) for `down` seconds and comes
        back; publication goes on `after` seconds more. Then until every delivery is
        received or `budget` seconds after the return."""
        prefix = f"bench.d{uuid.uuid4().hex[:8]}"
        types = [f"{prefix}.r{i}" for i in range(subscriptions)]
        others = SlowReceivers(self.workdir, [free_port() for _ in range(4)], 0, 0)
        victim = SlowReceivers(self.workdir, [free_port()], 0, 0)
        others.start()
        victim.start()
        targets = [(f"http://127.0.0.1:{victim.ports[0]}/sub0", types[0])]
        targets += [
            (f"http://127.0.0.1:{others.ports[i % 4]}/sub{i}", types[i])
            for i in range(1, subscriptions)
        ]
        self.subscribe_each(targets)
        events = rate * (before + down + after)
        times: dict[str, float] = {}

        async def outage() -> None:
            await asyncio.sleep(before)
            times["down"] = time.time()
            await asyncio.to_thread(victim.stop)
            await asyncio.sleep(down)
            await asyncio.to_thread(victim.start)
            times["back"] = time.time()

        cpu = self.cpu()
        snapshot = cpu.snapshot()
        try:
            stopping = asyncio.create_task(outage())
            started, _ = await self.publish(events, rate, types[0], types)
            await stopping
            await self.until_received([others, victim], events, times["back"] + budget)
            spent = cpu.spent(snapshot, cpu.snapshot())
        finally:
            others.stop()
            victim.stop()
        await asyncio.sleep(1.5)
        stats = self.prefix_stats(prefix)
        with psycopg.connect(self.database_url) as conn:
            active = conn.execute(
                "SELECT is_active FROM subscriptions WHERE %s = ANY(events)", (types[0],)
            ).fetchone()
            statuses = conn.execute(
                "SELECT status, count(*) FROM deliveries WHERE event_type = %s GROUP BY 1"
                " ORDER BY 1",
                (types[0],),
            ).fetchall()
        down_at, back_at = times["down"], times["back"]
        # The victim's backlog: its events due before its return (the publisher paces
        # event n at `started + n / rate`) that it had not received when it stopped.
        backlog = {n for n in range(0, events, subscriptions) if started + n / rate < back_at}
        victim_first = first_receipts(victim.records)
        # Less what it had received before it stopped.
        backlog -= {n for (_, n), (_, at) in victim_first.items() if at < down_at}
        received = [victim_first[("/sub0", n)][1] for n in backlog if ("/sub0", n) in victim_first]
        cleared = len(received) == len(backlog)
        windows: dict[str, list[float]] = {"before": [], "during": [], "after": []}
        for path, _, sent, arrived, _ in others.records:
            if path == "/sub0":
                continue
            window = "before" if sent < down_at else "during" if sent < back_at else "after"
            windows[window].append(arrived - sent)
        others_delivered = len(first_receipts(others.records))
        delivered = others_delivered + len(victim_first)
        row = {
            "scenario": f"receiver down {down} s, {subscriptions} subs",
            "offered_per_s": rate,
            "down": "refused",
            "backlog": len(backlog),
            "backlog_left": len(backlog) - len(received),
            "cleared_s_after_return": round(max(received) - back_at, 1)
            if cleared and received
            else f">{budget:.0f}",
            "down_sub_active": bool(active[0]) if active else "-",
            "down_sub_statuses": " ".join(f"{s}={c}" for s, c in statuses),
            # Its events no delivery was stored for: those that came once it was disabled.
            "down_sub_not_stored": len(range(0, events, subscriptions))
            - sum(int(c) for _, c in statuses),
            **{
                f"others_p99_{name}_ms": round(percentile(values, 0.99) * 1000, 1)
                for name, values in windows.items()
            },
            # The other subscriptions' (the stopped one's are `backlog_left` and
            # `down_sub_not_stored`: a disabled subscription's events are not owed to it).
            "lost": events - len(range(0, events, subscriptions)) - others_delivered,
            "set_aside": stats["set_aside"],
            "cpu_us_total": round(sum(spent.values()) / max(delivered, 1) * 1e6),
        }
        print(json.dumps(row), flush=True)
        return row


class SlowReceivers:
    """A `slow_receiver.py` process on `ports` of 127.0.0.1, pinned to the last core as the
    drains' receiver is. `stop` ends it with SIGTERM: it writes what it received, and its
    ports refuse connections from then on; `start` again brings it back on the same ports."""

    def __init__(self, workdir: Path, ports: list[int], min_ms: float, max_ms: float) -> None:
        self.ports = ports
        self.min_ms, self.max_ms = min_ms, max_ms
        self.dump = workdir / f"received-{ports[0]}.json"
        self.process: subprocess.Popen[bytes] | None = None
        self.records: list[tuple[str, int, float, float, float]] = []

    def start(self) -> None:
        cores = os.cpu_count() or 1
        command = [
            sys.executable,
            str(HERE / "slow_receiver.py"),
            f"--min-ms={self.min_ms}",
            f"--max-ms={self.max_ms}",
            f"--dump={self.dump}",
            *map(str, self.ports),
        ]
        self.process = subprocess.Popen(
            command,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=lambda: os.sched_setaffinity(0, {cores - 1}),
        )
        for port in self.ports:
            wait_for_port("127.0.0.1", port, 30)

    def stop(self) -> None:
        """Ends the process; its records so far are kept in `records`."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            self.process.kill()
        if self.dump.exists():
            self.records += [(p, n, s, a, e) for p, n, s, a, e in json.loads(self.dump.read_text())]
            self.dump.unlink()

    def distinct(self) -> int:
        """Distinct deliveries received since the last start (a count only: cheap to ask)."""
        url = f"http://127.0.0.1:{self.ports[0]}/stats"
        with urllib.request.urlopen(url, timeout=30) as response:
            return int(json.loads(response.read())["distinct"])


def first_receipts(
    records: list[tuple[str, int, float, float, float]],
) -> dict[tuple[str, int], tuple[float, float]]:
    """Each delivery's (path, event number) -> (sent_at, its first arrival)."""
    first: dict[tuple[str, int], tuple[float, float]] = {}
    for path, n, sent_at, arrived, _ in records:
        known = first.get((path, n))
        if known is None or arrived < known[1]:
            first[(path, n)] = (sent_at, arrived)
    return first


def met(ok: bool) -> str:
    return "met" if ok else "MISSED"


class OtlpSink:
    """Where traced workers export: answers every OTLP/HTTP request 200 and counts them. A
    collector's own cost is not the product's, so this one does nothing with the spans."""

    def __init__(self) -> None:
        self.requests = 0
        self.bytes = 0
        self.port = free_port()
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        async def accept(request: web.Request) -> web.Response:
            self.requests += 1
            self.bytes += len(await request.read())
            return web.Response(status=200, content_type="application/x-protobuf")

        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/traces", accept)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def environment(self, ratio: float) -> dict[str, str]:
        return {
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{self.port}",
            "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
            "OTEL_TRACES_SAMPLER_ARG": str(ratio),
        }


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
            Path(workdir),
            durable=not args.unsafe_fast_db,
            python_receiver=args.python_receiver,
            profile=args.profile,
        )
        try:
            bench.start()
            for _ in range(args.workers):
                bench.start_worker()
            await bench.workers_waiting(args.workers)
            e, w, b, n = args.events, args.workers, args.budget, args.seconds
            plan: list[tuple[str, int, int, float | None, bool]] = [
                ("drain, 1 sub", e, 1, None, True),
                ("drain, 10 subs", e // 5, 10, None, True),
                ("max rate, 1 sub", e, 1, None, False),
                ("max rate, 10 subs", e // 5, 10, None, False),
                ("1,000/s, 1 sub", 1000 * n, 1, 1000, False),
                ("5,000/s, 1 sub", 5000 * n, 1, 5000, False),
            ]
            rows = [
                await bench.scenario(name, events, subs, rate, b, drain=drain, workers=w)
                for name, events, subs, rate, drain in plan
                if args.only in name
            ]
            slow: list[dict[str, Any]] = []
            slow_name = f"slow receivers, {args.slow_subscriptions} subs"
            if args.only in slow_name:
                slow.append(
                    await bench.slow_receivers(args.slow_subscriptions, 10, args.slow_rate, n, b)
                )
            if args.only in f"receiver down {args.down_seconds} s, 10 subs":
                # The spec's auto-disable (100 failed attempts in a row) is the product's rule;
                # this scenario is about the return, so it runs with the threshold raised
                # (`--down-failure-threshold`, printed with the row).
                threshold = {"WEBHOOK_HUB_FAILURE_THRESHOLD": str(args.down_failure_threshold)}
                bench.stop_workers()
                await bench.workers_waiting(0)
                for _ in range(w):
                    bench.start_worker(threshold)  # an overlay of the environment
                await bench.workers_waiting(w)
                row = await bench.receiver_down(
                    10, args.slow_rate, 20, args.down_seconds, 30, max(b, args.down_seconds)
                )
                row["failure_threshold"] = args.down_failure_threshold
                slow.append(row)
            if args.only in "set aside vs direct, 2 slow subs":
                # The same load twice, 2 subscriptions whose receivers allow about 1,460/s
                # (128 connections each, 175 ms on average): with the default per-subscription
                # cap deliveries wait and are set aside; with a cap of 256 none does. The
                # difference in CPU is the set-aside path's.
                for label, env in (
                    # Nothing waits long enough to be set aside, however slow the machine:
                    # on a loaded one the receivers answer later, and 256 slots did not keep
                    # every delivery under DISPATCH_QUEUE_SECONDS.
                    (
                        "direct",
                        {
                            "WEBHOOK_HUB_PER_SUBSCRIPTION_CONCURRENCY": "256",
                            "WEBHOOK_HUB_DISPATCH_QUEUE_SECONDS": "600",
                        },
                    ),
                    ("set aside", {}),
                ):
                    bench.stop_workers()
                    await bench.workers_waiting(0)
                    for _ in range(w):
                        bench.start_worker(env)  # an overlay of the environment, not tracing
                    await bench.workers_waiting(w)
                    row = await bench.slow_receivers(2, 2, args.slow_rate, min(n, 30), b)
                    row["scenario"] = f"2 slow subs, {label}"
                    slow.append(row)
            traced: list[tuple[dict[str, Any], dict[str, Any]]] = []
            sink = OtlpSink()
            if args.traced_sampling > 0:
                await sink.start()
                tracing = sink.environment(args.traced_sampling)
                label = f"traced {args.traced_sampling:.0%}"
                bench.stop_workers()
                for _ in range(args.workers):
                    bench.start_worker(tracing)
                await bench.workers_waiting(args.workers)
                for untraced in [row for row in rows if row["scenario"] in TRACED_SCENARIOS]:
                    name = untraced["scenario"]
                    events, subs, rate, drain = next(
                        (e_, s_, r_, d_) for n_, e_, s_, r_, d_ in plan if n_ == name
                    )
                    row = await bench.scenario(
                        f"{name}, {label}",
                        events,
                        subs,
                        rate,
                        b,
                        drain=drain,
                        workers=w,
                        tracing=tracing,
                    )
                    traced.append((untraced, row))
                rows += [row for _, row in traced]
            bench.stop_workers()  # the bare loops measure the clients alone
            await sink.stop()
            bare = await bench.bare_loops(args.events, 256) if rows else {}
            receiver = bench.receiver_kind
        finally:
            bench.stop()
    print(
        f"\nwebhook-hub benchmark on {platform.machine()}, {os.cpu_count()} cores, "
        # The build matters as much as the version: a plain source build (pyenv's) costs the
        # workers more CPU than an optimised one (deploy/local/interpreter.py).
        f"Python {platform.python_version()} ({sys.base_prefix}), {args.workers} worker "
        "process(es), "
        f"receiver {receiver}, PostgreSQL fsync {'off' if args.unsafe_fast_db else 'on'}\n"
    )
    if rows:
        print(table(rows))
    for row in slow:
        print()
        print(table([row]))
    print()
    print_targets(rows, slow, receiver)
    best = max((row["deliveries_per_s"] for row in rows), default=0)
    for name, loop in bare.items():
        print(
            f"bare {name} sign-and-POST loop: {loop['per_s']} requests/s, {loop['cpu_us']} µs CPU"
            f" per request; engine's best: {best} deliveries/s = {best / loop['per_s']:.0%} of it"
        )
    for untraced, row in traced:
        print(
            f"tracing on ({args.traced_sampling:.0%} sampled) in '{untraced['scenario']}': "
            f"CPU per event {untraced['cpu_us_total']} → {row['cpu_us_total']} µs "
            f"({row['cpu_us_total'] - untraced['cpu_us_total']:+d}), p99 {untraced['p99_ms']} → "
            f"{row['p99_ms']} ms, {untraced['deliveries_per_s']} → {row['deliveries_per_s']} "
            f"deliveries/s"
        )
    if traced:
        print(f"OTLP export: {sink.requests} requests, {sink.bytes / 1e6:.1f} MB of spans")
    lost = sum(row["lost"] for row in rows) + sum(row["lost"] for row in slow)
    duplicates = sum(row["dup_ids"] for row in rows) + sum(row.get("dup", 0) for row in slow)
    print(f"events lost: {lost}; duplicate webhook-ids: {duplicates}")
    return 0 if lost == 0 else 1


def print_targets(rows: list[dict[str, Any]], slow: list[dict[str, Any]], receiver: str) -> None:
    """Issue 31's "no cliff" targets, each met or missed, for the rows this run has."""
    drains = {row["scenario"]: row for row in rows}
    one, ten = drains.get("drain, 1 sub"), drains.get("drain, 10 subs")
    if one and ten:
        ratio = ten["deliveries_per_s"] / max(one["deliveries_per_s"], 1)
        note = (
            ""
            if receiver == "aiohttp"
            else " (the target is the Python receiver's: run with --python-receiver)"
        )
        print(
            f"target: 10-sub drain >= 80 % of the 1-sub drain's deliveries/s ({receiver} receiver): "
            f"{ten['deliveries_per_s']} / {one['deliveries_per_s']} = {ratio:.0%}: {met(ratio >= 0.8)}{note}"
        )
        share = ten["set_aside"] / max(ten["events"] * ten["subs"], 1)
        if share:
            # The drains' CPU is per delivery of all kinds: with the 1-sub drain's (none set
            # aside) as the direct ones' cost, what the set-aside share adds is theirs.
            direct = one["cpu_us_total"]
            aside = (ten["cpu_us_total"] - (1 - share) * direct) / share
            print(
                f"target: CPU per set-aside delivery <= 2x a direct one: {aside:.0f} µs "
                f"(estimated: {share:.0%} of the 10-sub drain set aside, the 1-sub drain's "
                f"{direct} µs as direct) = {aside / max(direct, 1):.1f}x: {met(aside <= 2 * direct)}"
            )
        else:
            print(
                "target: CPU per set-aside delivery <= 2x a direct one: none set aside in the drains"
            )
    pair = {row["scenario"]: row for row in slow if row["scenario"].startswith("2 slow subs")}
    direct, aside = pair.get("2 slow subs, direct"), pair.get("2 slow subs, set aside")
    if direct and aside:
        # Each row's CPU per delivery is a mix of the two kinds, in its own shares: (1 - s) *
        # direct + s * aside. Two rows, two unknowns. With nothing set aside in the first
        # (a quiet machine) its figure is the direct one; on a loaded one the receivers
        # answer later and the first row sets some aside too.
        s1, s2 = (
            row["set_aside"] / (row["offered_per_s"] * row["seconds"]) for row in (direct, aside)
        )
        groups: tuple[str, ...] = ("workers", "postgres", "nats", "total")
        if s2 - s1 < 0.05:
            groups = ()
            print(
                "target: CPU per set-aside delivery <= 2x a direct one: the two rows set aside "
                f"the same share ({s1:.0%}, {s2:.0%}); no estimate"
            )
        for group in groups:
            c1, c2 = direct[f"cpu_us_{group}"], aside[f"cpu_us_{group}"]
            extra = (c2 - c1) / (s2 - s1)
            base = c1 - s1 * extra
            each = base + extra
            line = f"{each:.0f} µs against {base:.0f} = {each / max(base, 1):.1f}x"
            if group == "total":
                print(
                    f"target: CPU per set-aside delivery <= 2x a direct one (2 slow subs, "
                    f"{s1:.0%} and {s2:.0%} set aside): {line}: {met(each <= 2 * base)}"
                )
            else:
                print(f"  CPU per set-aside delivery, {group}: {line}")
    for row in slow:
        if row["scenario"].startswith("2 slow subs"):
            continue
        if row["scenario"].startswith("slow receivers"):
            ok = row["lost"] == 0 and row["delivered_per_s"] >= 0.95 * row["offered_per_s"]
            print(
                f"target: slow receivers all delivered at {row['offered_per_s']}/s (>= 95 %, "
                f"0 lost): {row['delivered_per_s']}/s, {row['lost']} lost: {met(ok)}; "
                f"p99 < 1 s: {row['p99_ms']} ms: {met(row['p99_ms'] < 1000)}"
            )
        else:
            left = row["backlog_left"]
            cleared = row["cleared_s_after_return"]
            ok = left == 0 and isinstance(cleared, float) and cleared <= 60
            progress = f"in {cleared} s" if not left else f"{left} of {row['backlog']} left"
            threshold = row.get("failure_threshold", "-")
            print(
                f"target: down receiver's backlog delivered within 60 s of its return: "
                f"{progress}: {met(ok)} (run with FAILURE_THRESHOLD={threshold}; the spec's "
                "is 100)"
            )
            base = row["others_p99_before_ms"]
            # "Unchanged", on a 2-core machine's noise: within 25 % or 10 ms of before's.
            bound = max(base * 1.25, base + 10)
            worst = max(row["others_p99_during_ms"], row["others_p99_after_ms"])
            print(
                f"target: others' p99 unchanged (within 25 % or 10 ms): before {base}, during "
                f"{row['others_p99_during_ms']}, after {row['others_p99_after_ms']} ms: "
                f"{met(worst <= bound)}"
            )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20000, help="events at max rate, 1 sub")
    parser.add_argument("--seconds", type=int, default=60, help="length of fixed-rate runs")
    parser.add_argument("--budget", type=float, default=180, help="seconds to wait per scenario")
    parser.add_argument("--unsafe-fast-db", action="store_true", help="PostgreSQL without fsync")
    parser.add_argument("--workers", type=int, default=1, help="worker processes")
    parser.add_argument(
        "--profile", type=Path, help="record each worker with py-spy into this folder"
    )
    parser.add_argument(
        "--only", default="", help="run only the scenarios whose name contains this"
    )
    parser.add_argument(
        "--traced-sampling",
        type=float,
        default=0.1,
        help="sampling ratio of the traced rows (0: none)",
    )
    parser.add_argument(
        "--slow-subscriptions", type=int, default=200, help="subscriptions of 'slow receivers'"
    )
    parser.add_argument(
        "--slow-rate", type=int, default=2000, help="events/s of the slow-receiver scenarios"
    )
    parser.add_argument(
        "--down-seconds", type=int, default=60, help="how long 'receiver down' stays down"
    )
    parser.add_argument(
        "--down-failure-threshold",
        type=int,
        default=1_000_000,
        help="FAILURE_THRESHOLD of 'receiver down' (the spec's is 100)",
    )
    parser.add_argument(
        "--python-receiver", action="store_true", help="use the aiohttp receiver even with nginx"
    )
    # uvloop, as the worker runs: the bare loop is the same machinery without the engine.
    return uvloop.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
