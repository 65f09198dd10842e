"""`make soak` for webhook-hub: events submitted over HTTP at a fixed rate for many minutes,
with the delivery log's partitions created and dropped meanwhile (issue 31, "a soak run").

Starts embedded PostgreSQL (fsync on) and NATS, a receiver on 127.0.0.1 (nginx from Debian's
packages when installed, logging each request's time and `webhook-id`; otherwise
`receiver.py`, which logs the same), `--workers` `webhook-hub worker` processes and
`--processes` `webhook-hub serve --reuse-port` processes, as `ingest.py` does. A consumer's
admin key registers a type with a JSON schema and subscribes `--subscriptions` endpoints of
the receiver to it over the API; then every `--tick` seconds the events due (`--rate` per
second) go to `POST /webhooks/events/batch` as one batch (100 events at 2,000/s), each with
an idempotency key of its own, at most `--in-flight` requests at a time (beyond that the
submitter falls behind, and the offered rate shows it).

The delivery log's partition width and retention are set short (`--partition-width`,
`--retention-minutes`) so partitions are created and dropped during the run, and the outbox
and idempotency keys are pruned on the same scale. After `--warmup-seconds` at the same rate
(each process's first requests are no baseline), per window of `--window-minutes`: offered
and delivered rates, p50/p99 from submission (the batch request sent) to receipt (the
receiver's clock, same machine), p99 of the batch requests' answers, the database's size,
each process's memory (RSS; PostgreSQL as the sum of its processes' PSS, which counts shared
buffers once), and the partitions of
`deliveries` (from pg_inherits: 0 while the table is not partitioned). At the end, after up to
`--drain-seconds` for the last deliveries: lost and duplicate `webhook-id`s (each accepted
event's id for each subscription is known to the submitter, as `webhook-id` is derived from
them), and the issue's soak targets, each met or MISSED.

Everything stays on 127.0.0.1, stops by itself after `--minutes` (and the drain), and stops
its processes on Ctrl-C or an error.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import psutil
import psycopg
from servicekit.embedded.network import free_port, wait_for_port
from webhook_hub.delivery_engine.jobs import delivery_id_for

HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent
sys.path.insert(0, str(HERE))
from ingest import DATA, Stack  # noqa: E402  (the bench's sibling modules)
from run import NGINX_CONF, met, percentile, table  # noqa: E402

# nginx as run.py configures it, logging each request's time (ms) before its `webhook-id`.
IDS_FORMAT = "log_format ids '$http_webhook_id';"
SOAK_NGINX_CONF = NGINX_CONF.replace(IDS_FORMAT, "log_format ids '$msec $http_webhook_id';")
assert SOAK_NGINX_CONF != NGINX_CONF, "run.py's nginx log format changed"
# The receiver's log is flushed every second: a window is read this long after its end.
LOG_LAG_SECONDS = 2.5
PARTITIONS = """
SELECT (SELECT count(*) FROM pg_inherits WHERE inhparent = 'deliveries'::regclass),
       (SELECT count(*) FROM pg_inherits WHERE inhparent = 'delivery_attempts'::regclass),
       pg_database_size(current_database())
"""


@dataclass
class Window:
    index: int
    started: float
    seconds: float
    submitted: int = 0
    refused: int = 0
    latencies: list[float] = field(default_factory=list)
    requests: list[float] = field(default_factory=list)  # each batch request's answer time
    sample: dict[str, Any] = field(default_factory=dict)


@dataclass
class Ledger:
    """What was submitted and what arrived, by delivery (`webhook-id` without `msg_`)."""

    subscriptions: list[uuid.UUID]
    expected: dict[int, float] = field(default_factory=dict)  # delivery -> submitted at
    received: set[int] = field(default_factory=set)
    # Receipts read before their batch's answer was (the race of a fast delivery), and
    # anything not submitted here (the subscriptions' `webhook.test` events).
    unmatched: list[tuple[float, int]] = field(default_factory=list)
    receipts: int = 0
    duplicates: int = 0
    submitted: int = 0
    refused: int = 0
    failed_requests: int = 0

    def accept(self, event_ids: list[uuid.UUID], at: float) -> None:
        for event_id in event_ids:
            for subscription in self.subscriptions:
                self.expected[delivery_id_for(subscription, event_id).int] = at

    def receive(self, lines: list[str], windows: list[Window], start: float, width: float) -> None:
        pending, self.unmatched = self.unmatched, []
        for line in lines:
            parts = line.split()
            if len(parts) != 2 or not parts[1].startswith("msg_"):
                continue
            pending.append((float(parts[0]), int(parts[1][4:], 16)))
        for at, delivery in pending:
            sent = self.expected.get(delivery)
            if sent is None:
                self.unmatched.append((at, delivery))
                continue
            self.receipts += 1
            if delivery in self.received:
                self.duplicates += 1
                continue
            self.received.add(delivery)
            index = int((at - start) // width)
            if 0 <= index < len(windows):
                windows[index].latencies.append(at - sent)


class Soak(Stack):
    """ingest.py's stack (PostgreSQL with fsync, NATS, API processes on one port, an admin
    key and a type with a schema), with workers, a receiver and subscriptions to it."""

    def __init__(self, workdir: Path, args: argparse.Namespace) -> None:
        super().__init__(workdir)
        self.args = args
        self.workers: list[subprocess.Popen[bytes]] = []
        self.receiver: subprocess.Popen[bytes] | None = None
        self.receiver_kind = ""
        self.receiver_port = free_port()
        self.ids_log = workdir / "ids.log"
        self.subscriptions: list[uuid.UUID] = []

    def start_all(self) -> None:
        self.start_receiver()
        self.start(worker=False)
        for index in range(self.args.workers):
            log = (self.workdir / f"worker-{index}.log").open("wb")
            with log:
                self.workers.append(
                    subprocess.Popen(
                        [str(BIN / "webhook-hub"), "worker"],
                        env=self.env(),
                        stdout=log,
                        stderr=subprocess.STDOUT,
                    )
                )
        self.start_servers(self.args.processes)
        self.register_type()
        self.subscribe()

    def start_receiver(self) -> None:
        nginx = shutil.which("nginx") or (
            "/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None
        )
        if nginx and not self.args.python_receiver:
            self.receiver_kind = "nginx"
            conf = self.workdir / "nginx.conf"
            conf.write_text(SOAK_NGINX_CONF.format(port=self.receiver_port, dir=self.workdir))
            command = [nginx, "-p", str(self.workdir), "-c", str(conf), "-g", "daemon off;"]
        else:
            self.receiver_kind = "aiohttp"
            command = [
                sys.executable,
                str(HERE / "receiver.py"),
                str(self.receiver_port),
                str(self.ids_log),
            ]
        self.receiver = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        wait_for_port("127.0.0.1", self.receiver_port, 30)

    def subscribe(self) -> None:
        """Subscriptions created over the API, as a consumer would (each gets a
        `webhook.test` event, which the ledger leaves out)."""
        for n in range(self.args.subscriptions):
            body = {
                "endpoint_url": f"http://127.0.0.1:{self.receiver_port}/sub{n}",
                "events": [self.event_type],
            }
            answer = self.post("/webhooks/subscriptions", body)
            self.subscriptions.append(uuid.UUID(answer["id"]))

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        request = urllib.request.Request(  # noqa: S310  (http on loopback)
            f"{self.url}{path}",
            data=json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {self.key}", "Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
            return dict(json.loads(response.read()))

    def memory(self) -> dict[str, float]:
        """MB of each process (RSS), PostgreSQL as its processes' PSS summed."""

        def rss(pid: int | None) -> float:
            try:
                return psutil.Process(pid).memory_info().rss / 1e6 if pid else 0.0
            except psutil.Error:
                return 0.0

        taken = {f"worker{i}_mb": rss(w.pid) for i, w in enumerate(self.workers)}
        taken["api_mb"] = sum(rss(s.pid) for s in self.servers)
        pss = 0.0
        try:
            root = psutil.Process(self.postgres.pid)
            for process in (root, *root.children(recursive=True)):
                try:
                    pss += process.memory_full_info().pss
                except psutil.Error:
                    continue  # a backend that ended meanwhile
        except psutil.Error:
            pass
        taken["postgres_mb"] = pss / 1e6
        taken["nats_mb"] = rss(self.nats.pid)
        return {k: round(v) for k, v in taken.items()}

    def database(self) -> dict[str, Any]:
        with psycopg.connect(self.database_url) as conn:
            row = conn.execute(PARTITIONS).fetchone()
        assert row is not None
        return {"partitions": f"{row[0]}/{row[1]}", "db_mb": round(row[2] / 1e6)}

    def stop(self) -> None:
        for process in (*self.workers, self.receiver):
            if process is not None and process.poll() is None:
                process.terminate()
                try:
                    process.wait(30)
                except subprocess.TimeoutExpired:
                    process.kill()
        super().stop()


class LogReader:
    """The receiver's log, read from where the last read stopped (whole lines only)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0

    def new_lines(self) -> list[str]:
        if not self.path.exists():
            return []
        with self.path.open("rb") as log:
            log.seek(self.offset)
            chunk = log.read()
        end = chunk.rfind(b"\n") + 1
        self.offset += end
        return chunk[:end].decode(errors="replace").splitlines()


async def submit(
    soak: Soak, ledger: Ledger, windows: list[Window], begin: float, start: float, until: float
) -> None:
    """The events due each tick as one batch request, at most `--in-flight` at a time, from
    `begin` (the warm-up's start) to `until`; those sent before `start` are in no window."""
    args = soak.args
    width = args.window_minutes * 60
    run = uuid.uuid4().hex[:8]
    slots = asyncio.Semaphore(args.in_flight)
    headers = {"Authorization": f"Bearer {soak.key}", "Content-Type": "application/json"}
    data = json.dumps(DATA)
    tasks: set[asyncio.Task[None]] = set()
    warm_up = Window(-1, begin, start - begin)

    async def send(http: aiohttp.ClientSession, first: int, count: int) -> None:
        try:
            items = ",".join(
                f'{{"type":"{soak.event_type}","data":{data},"idempotency_key":"{run}-{n}"}}'
                for n in range(first, first + count)
            )
            at = time.time()
            index = int((at - start) // width)
            window = windows[min(index, len(windows) - 1)] if index >= 0 else warm_up
            window.submitted += count
            ledger.submitted += count
            async with http.post(
                f"{soak.url}/webhooks/events/batch",
                data=f'{{"events":[{items}]}}',
                headers=headers,
            ) as response:
                if response.status != 200:
                    ledger.failed_requests += 1
                    window.refused += count
                    ledger.refused += count
                    return
                answer = await response.json()
            window.requests.append(time.time() - at)
            accepted = [uuid.UUID(r["id"]) for r in answer["results"] if r["result"] == "accepted"]
            refused = count - len(accepted)
            window.refused += refused
            ledger.refused += refused
            ledger.accept(accepted, at)
        except (aiohttp.ClientError, TimeoutError):
            # Accepted or not, unknown: counted refused, and out of the lost count.
            ledger.failed_requests += 1
            window.refused += count
            ledger.refused += count
        finally:
            slots.release()

    timeout = aiohttp.ClientTimeout(total=30)
    connector = aiohttp.TCPConnector(limit=args.in_flight)
    async with aiohttp.ClientSession(timeout=timeout, connector=connector) as http:
        sent = 0
        while (now := time.time()) < until:
            due = int((now - begin) * args.rate) - sent
            while due > 0:
                count = min(due, 500)
                await slots.acquire()  # waiting here is falling behind: offered rate drops
                task = asyncio.create_task(send(http, sent, count))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
                sent += count
                due -= count
            await asyncio.sleep(max(0.0, args.tick - (time.time() - now)))
        if tasks:
            await asyncio.wait(tasks, timeout=60)


async def watch(
    soak: Soak, ledger: Ledger, windows: list[Window], start: float, reader: LogReader
) -> None:
    """At each window's end, the database and processes sampled; its row printed once the
    receiver's log has caught up."""
    width = soak.args.window_minutes * 60
    for window in windows:
        end = window.started + window.seconds
        await asyncio.sleep(max(0.0, end - time.time()))
        window.sample = {**soak.database(), **soak.memory()}
        await asyncio.sleep(LOG_LAG_SECONDS)
        ledger.receive(reader.new_lines(), windows, start, width)
        print(json.dumps(row_of(window)), flush=True)


def row_of(window: Window) -> dict[str, Any]:
    return {
        "window": f"{window.index * window.seconds / 60:g}-{(window.index + 1) * window.seconds / 60:g} min",
        "offered_per_s": round(window.submitted / window.seconds),
        "refused": window.refused,
        "delivered_per_s": round(len(window.latencies) / window.seconds),
        "p50_ms": round(percentile(window.latencies, 0.5) * 1000, 1),
        "p99_ms": round(percentile(window.latencies, 0.99) * 1000, 1),
        "request_p99_ms": round(percentile(window.requests, 0.99) * 1000, 1),
        **window.sample,
    }


async def drain(
    soak: Soak, ledger: Ledger, windows: list[Window], start: float, reader: LogReader
) -> float:
    """Until every accepted event's deliveries arrived, or `--drain-seconds`; how long."""
    began = time.time()
    width = soak.args.window_minutes * 60
    while time.time() - began < soak.args.drain_seconds:
        ledger.receive(reader.new_lines(), windows, start, width)
        if len(ledger.received) >= len(ledger.expected):
            break
        await asyncio.sleep(1)
    await asyncio.sleep(LOG_LAG_SECONDS)  # a duplicate arriving late is still counted
    ledger.receive(reader.new_lines(), windows, start, width)
    return time.time() - began


def targets(windows: list[Window], ledger: Ledger, p99_target_ms: float | None) -> list[str]:
    """The issue's soak targets, each met or MISSED; with `p99_target_ms`, the end-to-end
    target of a short run at a fixed rate too (make bench's rows over HTTP)."""
    first, last = windows[0], windows[-1]
    lines = []
    if p99_target_ms is not None:
        worst_ms = max(percentile(w.latencies, 0.99) for w in windows) * 1000
        lines.append(
            f"target: p99 submission → receipt < {p99_target_ms:.0f} ms in every window: "
            f"worst {worst_ms:.1f} ms: {met(worst_ms < p99_target_ms)}"
        )
    if len(windows) < 2:
        lines.append("targets need two windows at least")
    else:

        def within(key: str) -> str:
            a, b = first.sample.get(key, 0), last.sample.get(key, 0)
            change = (b - a) / a if a else float("inf")
            return f"{a} → {b} MB ({change:+.0%}): {met(abs(change) <= 0.10)}"

        lines.append(
            f"target: database size, last window within 10 % of the first's: {within('db_mb')}"
        )
        for key in sorted(k for k in first.sample if k.startswith("worker")):
            lines.append(
                f"target: {key[:-3]} RSS, last window within 10 % of the first's: {within(key)}"
            )
        base = percentile(first.latencies, 0.99)
        worst = max(percentile(w.latencies, 0.99) for w in windows)
        lines.append(
            f"target: p99 in every window < 2x the first window's ({base * 1000:.1f} ms): "
            f"worst {worst * 1000:.1f} ms: {met(worst < 2 * base)}"
        )
    lost = len(ledger.expected) - len(ledger.received)
    lines.append(
        f"target: 0 lost, 0 duplicate ids: {lost} lost, {ledger.duplicates} duplicate: "
        f"{met(lost == 0 and ledger.duplicates == 0)}"
    )
    return lines


async def main_async(args: argparse.Namespace) -> int:
    # SIGTERM stops the run as Ctrl-C does (asyncio.run's): the run is cancelled, and its
    # processes are stopped on the way out.
    main_task = asyncio.current_task()
    assert main_task is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, main_task.cancel)
    retention_days = args.retention_minutes / 1440
    # The delivery log's partitions and retention (issue 31, item 2), and the other tables'
    # pruning on the same scale; settings a build does not know are ignored.
    os.environ.update(
        {
            "WEBHOOK_HUB_DELIVERY_PARTITION_WIDTH": args.partition_width,
            "WEBHOOK_HUB_DELIVERY_RETENTION_DAYS": f"{retention_days:.6f}",
            "WEBHOOK_HUB_DELIVERY_ROLLUP_RETENTION_DAYS": f"{retention_days * 3:.6f}",
            "WEBHOOK_HUB_OUTBOX_RETENTION_HOURS": f"{retention_days * 24:.6f}",
            "WEBHOOK_HUB_IDEMPOTENCY_WINDOW_HOURS": f"{retention_days * 24:.6f}",
            "WEBHOOK_HUB_IDEMPOTENCY_PRUNE_SECONDS": "30",
            "WEBHOOK_HUB_RETENTION_PRUNE_SECONDS": "30",
        }
    )
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="webhook-hub-soak-") as workdir:
        soak = Soak(Path(workdir), args)
        try:
            soak.start_all()
            ledger = Ledger(soak.subscriptions)
            reader = LogReader(soak.ids_log)
            width = args.window_minutes * 60
            count = max(1, round(args.minutes / args.window_minutes))
            # The windows start after a warm-up at the same rate: each process's first
            # requests (connections, prepared statements, code loaded) are not the baseline.
            begin = time.time() + 1
            start = begin + args.warmup_seconds
            windows = [Window(i, start + i * width, width) for i in range(count)]
            print(
                f"soak: {args.rate} events/s for {args.minutes} min in batches every "
                f"{args.tick * 1000:.0f} ms, {args.subscriptions} subscription(s), receiver "
                f"{soak.receiver_kind}, {args.workers} worker(s), {args.processes} API "
                f"process(es), partitions of {args.partition_width}, retention "
                f"{args.retention_minutes} min; windows from {args.warmup_seconds:g} s in",
                flush=True,
            )
            watching = asyncio.create_task(watch(soak, ledger, windows, start, reader))
            await submit(soak, ledger, windows, begin, start, start + count * width)
            await watching
            drained = await drain(soak, ledger, windows, start, reader)
            final = {**soak.database(), **soak.memory()}
        finally:
            soak.stop()
    load_after = os.getloadavg()
    print(
        f"\nwebhook-hub soak on {platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, PostgreSQL fsync on; load average before "
        f"{load_before[0]:.2f}, after {load_after[0]:.2f} (1 min)\n"
    )
    print(table([row_of(w) for w in windows]))
    lost = len(ledger.expected) - len(ledger.received)
    print(
        f"\nsubmitted {ledger.submitted}, accepted {len(ledger.expected) // max(len(ledger.subscriptions), 1)}"
        f", refused {ledger.refused} ({ledger.failed_requests} failed requests); "
        f"deliveries expected {len(ledger.expected)}, received {len(ledger.received)} "
        f"(drain {drained:.0f} s); lost {lost}, duplicate ids {ledger.duplicates}; "
        f"other ids {len(ledger.unmatched)} (the subscriptions' test events); after the "
        f"drain: {json.dumps(final)}"
    )
    for line in targets(windows, ledger, args.p99_target_ms):
        print(line)
    return 0 if lost == 0 and ledger.duplicates == 0 else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=20, help="length of the run")
    parser.add_argument("--window-minutes", type=float, default=5, help="length of a window")
    parser.add_argument("--rate", type=int, default=2000, help="events submitted per second")
    parser.add_argument("--tick", type=float, default=0.05, help="seconds between batches")
    parser.add_argument("--in-flight", type=int, default=8, help="batch requests at a time")
    parser.add_argument("--subscriptions", type=int, default=1, help="endpoints subscribed")
    parser.add_argument("--workers", type=int, default=1, help="worker processes")
    parser.add_argument("--processes", type=int, default=2, help="API processes")
    parser.add_argument("--partition-width", default="1m", help="DELIVERY_PARTITION_WIDTH")
    parser.add_argument(
        "--retention-minutes", type=float, default=3, help="DELIVERY_RETENTION_DAYS, in minutes"
    )
    parser.add_argument(
        "--warmup-seconds", type=float, default=30, help="at the rate before the first window"
    )
    parser.add_argument(
        "--drain-seconds", type=float, default=60, help="at most this long for the last ones"
    )
    parser.add_argument(
        "--python-receiver", action="store_true", help="receiver.py even with nginx installed"
    )
    parser.add_argument(
        "--p99-target-ms",
        type=float,
        default=None,
        help="also print met/MISSED against this p99 (make bench's end-to-end rows over HTTP)",
    )
    try:
        return asyncio.run(main_async(parser.parse_args()))
    except (KeyboardInterrupt, asyncio.CancelledError):
        print("soak stopped before its end; its processes are stopped")
        return 130


if __name__ == "__main__":
    sys.exit(main())
