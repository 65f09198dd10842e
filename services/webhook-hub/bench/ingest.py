"""`make bench` for webhook-hub's front door: events submitted over HTTP, per second.

Starts embedded PostgreSQL (fsync on) and NATS, one `webhook-hub worker` (its relay publishes
what the API writes, as in production) and `--processes` `webhook-hub serve --reuse-port`
processes on one port, then drives `POST /webhooks/events` and `POST /webhooks/events/batch`
with wrk (Debian's package; `make bench` installs it when missing) from another process, at
`--connections` requests in flight for `--seconds` each (and at most `--max-requests`). The
producer is a consumer's admin key submitting a type of its own with a JSON schema, so every
event is authenticated, authorized and checked against the schema as in production.

Each row: events/s, requests/s, p50/p99 of a request, answers that were not 2xx, and the CPU
the API processes and PostgreSQL spent per event. Then the same single-event row with tracing
on (every request sampled, exported over OTLP/HTTP to a sink in this process). The machine's
load average is printed before and after: other processes on it move the figures.
Everything stays on 127.0.0.1 and stops by itself.
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
from pathlib import Path
from typing import Any

from servicekit.db.admin import database_url_for, ensure_database
from servicekit.db.migrations import upgrade
from servicekit.embedded.nats import EmbeddedNats
from servicekit.embedded.network import free_port, wait_for_port
from servicekit.embedded.postgres import EmbeddedPostgres

HERE = Path(__file__).resolve().parent
MIGRATIONS = HERE.parent / "migrations"
BIN = Path(sys.executable).parent
sys.path.insert(0, str(HERE))
from run import OtlpSink, ProcessCpu, table  # noqa: E402  (the bench's sibling module)

BATCH_SIZE = 500
SCHEMA = {
    "type": "object",
    "properties": {"id": {"type": "string"}, "total": {"type": "number"}},
    "required": ["id", "total"],
}
DATA = {"id": "inv_1001", "total": 99.5, "note": "x" * 80}

# wrk's script: each request a POST of the body, with a new Idempotency-Key when `keyed`
# (per thread and per scenario, so no key repeats), stopping after `limit` answers; at the end
# one line of JSON with the counts and latency percentiles (µs).
WRK_SCRIPT = """
local path, auth, body, keyed, batch, label, limit = %(args)s
local counter, seen, thread_id = 0, 0, 0
local threads = {}
function setup(thread)
  thread:set("thread_id", #threads + 1)
  table.insert(threads, thread)
end
local head = '{"events": ['
local item = '{"type": "%(type)s", "data": %(data)s, "idempotency_key": "'
function request()
  counter = counter + 1
  local headers = {["Authorization"] = auth, ["Content-Type"] = "application/json"}
  if batch and keyed then
    local parts = {}
    for i = 1, %(batch_size)d do
      parts[i] = item .. label .. "-" .. thread_id .. "-" .. counter .. "-" .. i .. '"}'
    end
    return wrk.format("POST", path, headers, head .. table.concat(parts, ",") .. "]}")
  end
  if keyed then headers["Idempotency-Key"] = label .. "-" .. thread_id .. "-" .. counter end
  return wrk.format("POST", path, headers, body)
end
function response(status, headers, body)
  seen = seen + 1
  if seen >= limit then wrk.thread:stop() end
end
function done(summary, latency, requests)
  io.write(string.format(
    '{"requests": %%d, "duration_us": %%d, "non2xx": %%d, "socket_errors": %%d, ' ..
    '"p50_us": %%d, "p99_us": %%d}\\n',
    summary.requests, summary.duration, summary.errors.status,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    latency:percentile(50), latency:percentile(99)))
end
"""


def lua_string(text: str) -> str:
    return json.dumps(text)  # a JSON string of ASCII is a Lua string literal


class Stack:
    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.postgres = EmbeddedPostgres(workdir / "pg", durable=True)
        self.nats = EmbeddedNats(workdir / "nats")
        self.port = free_port()
        self.database_url = ""
        self.servers: list[subprocess.Popen[bytes]] = []
        self.worker: subprocess.Popen[bytes] | None = None
        self.key = ""
        self.event_type = f"bench.ingest-{uuid.uuid4().hex[:8]}"

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        return {
            **{k: v for k, v in os.environ.items() if not k.startswith("OTEL_")},
            "WEBHOOK_HUB_DATABASE_URL": self.database_url,
            "WEBHOOK_HUB_NATS_URL": self.nats.url,
            "WEBHOOK_HUB_LOG_LEVEL": "WARNING",
            **(extra or {}),
        }

    def start(self, worker: bool) -> None:
        self.postgres.start()
        self.nats.start()
        self.database_url = database_url_for(self.postgres.url, "webhook_hub_ingest")
        ensure_database(self.database_url)
        upgrade(MIGRATIONS, self.database_url)
        created = subprocess.run(
            [
                str(BIN / "webhook-hub"),
                "api-keys",
                "create",
                "--owner",
                "bench",
                "--level",
                "admin",
            ],
            env=self.env(),
            check=True,
            capture_output=True,
            text=True,
        )
        self.key = created.stdout.strip().splitlines()[-1]
        if worker:
            log = (self.workdir / "worker.log").open("wb")
            with log:
                self.worker = subprocess.Popen(
                    [str(BIN / "webhook-hub"), "worker"],
                    env=self.env(),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )

    def start_servers(self, processes: int, tracing: dict[str, str] | None = None) -> None:
        self.stop_servers()
        for index in range(processes):
            log = (self.workdir / f"serve-{index}.log").open("ab")
            with log:
                self.servers.append(
                    subprocess.Popen(
                        [str(BIN / "webhook-hub"), "serve", "--reuse-port"],
                        env=self.env({"WEBHOOK_HUB_PORT": str(self.port), **(tracing or {})}),
                        stdout=log,
                        stderr=subprocess.STDOUT,
                    )
                )
        wait_for_port("127.0.0.1", self.port, 60)
        # Every process answering: readiness of each is not visible through the shared
        # port, so ask until a few dozen fresh connections have all been answered.
        deadline = time.monotonic() + 60
        answered = 0
        while answered < 40 and time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"{self.url}/healthz", timeout=5).read()  # noqa: S310
                answered += 1
            except OSError:
                time.sleep(0.2)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def register_type(self) -> None:
        body = {"name": self.event_type, "schema": SCHEMA, "example_payload": DATA}
        request = urllib.request.Request(  # noqa: S310  (http on loopback)
            f"{self.url}/webhooks/event-types",
            data=json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {self.key}", "Content-Type": "application/json"},
            method="POST",
        )
        urllib.request.urlopen(request, timeout=30).read()  # noqa: S310

    def cpu(self) -> ProcessCpu:
        return ProcessCpu(
            {
                "api": [s.pid for s in self.servers],
                "postgres": [self.postgres.pid] if self.postgres.pid else [],
                "worker": [self.worker.pid] if self.worker else [],
            }
        )

    def stop_servers(self) -> None:
        for process in self.servers:
            process.terminate()
        for process in self.servers:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
        self.servers = []

    def stop(self) -> None:
        self.stop_servers()
        if self.worker is not None:
            self.worker.terminate()
            self.worker.wait(30)
        self.nats.stop()
        self.postgres.stop()


async def drive(
    stack: Stack,
    name: str,
    *,
    keyed: bool,
    batch: bool,
    seconds: float,
    connections: int,
    max_requests: int,
    profile: Path | None = None,
) -> dict[str, Any]:
    single = json.dumps({"type": stack.event_type, "data": DATA})
    events = [{"type": stack.event_type, "data": DATA} for _ in range(BATCH_SIZE)]
    body = json.dumps({"events": events}) if batch else single
    label = f"{name.replace(' ', '_')}-{uuid.uuid4().hex[:6]}"
    threads = min(2, connections)
    args = [
        lua_string("/webhooks/events/batch" if batch else "/webhooks/events"),
        lua_string(f"Bearer {stack.key}"),
        lua_string(body),
        "true" if keyed else "false",
        "true" if batch else "false",
        lua_string(label),
        str(max(1, max_requests // threads)),
    ]
    script = stack.workdir / f"{label}.lua"
    script.write_text(
        WRK_SCRIPT
        % {
            "args": ", ".join(args),
            "type": stack.event_type,
            "data": json.dumps(DATA).replace("\\", "\\\\").replace("'", "\\'"),
            "batch_size": BATCH_SIZE,
        }
    )
    samplers: list[subprocess.Popen[bytes]] = []
    if profile is not None:
        # Sampled stacks of each API process, collapsed (profile_top.py reads them).
        profile.mkdir(parents=True, exist_ok=True)  # noqa: ASYNC240  (before the run)
        for server in stack.servers:
            out_file = profile / f"{label}-{server.pid}.txt"
            spy = ["py-spy", "record", "--format", "raw", "-r", "200", "-o", str(out_file)]
            samplers.append(
                subprocess.Popen(  # noqa: ASYNC220  (started, not waited on, here)
                    [*spy, "--pid", str(server.pid), "--duration", str(max(1, round(seconds)))],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
    cpu = stack.cpu()
    before = cpu.snapshot()
    process = await asyncio.create_subprocess_exec(
        "wrk",
        f"-t{threads}",
        f"-c{connections}",
        f"-d{max(1, round(seconds))}s",
        "--timeout",
        "10s",
        "-s",
        str(script),
        f"{stack.url}{'/webhooks/events/batch' if batch else '/webhooks/events'}",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    spent = cpu.spent(before, cpu.snapshot())
    for sampler in samplers:
        sampler.wait(60)
    lines = [line for line in out.decode().splitlines() if line.startswith("{")]
    if process.returncode != 0 or not lines:
        raise RuntimeError(f"wrk failed: {out.decode()}\n{err.decode()}")
    result = json.loads(lines[-1])
    per_request = BATCH_SIZE if batch else 1
    seconds_run = result["duration_us"] / 1e6
    ok_requests = result["requests"] - result["non2xx"]
    events = ok_requests * per_request
    return {
        "scenario": name,
        "events_per_s": round(events / seconds_run),
        "requests_per_s": round(result["requests"] / seconds_run),
        "p50_ms": round(result["p50_us"] / 1000, 1),
        "p99_ms": round(result["p99_us"] / 1000, 1),
        "non_2xx": result["non2xx"],
        "socket_errors": result["socket_errors"],
        "api_cpu_us_per_event": round(spent["api"] * 1e6 / max(events, 1)),
        "pg_cpu_us_per_event": round(spent["postgres"] * 1e6 / max(events, 1)),
        "worker_cpu_us_per_event": round(spent["worker"] * 1e6 / max(events, 1)),
    }


def wrk_installed() -> bool:
    return shutil.which("wrk") is not None


async def main_async(args: argparse.Namespace) -> int:
    load_before = os.getloadavg()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="webhook-hub-ingest-") as workdir:
        stack = Stack(Path(workdir))
        sink = OtlpSink()
        try:
            stack.start(worker=not args.no_worker)
            stack.start_servers(args.processes)
            stack.register_type()
            plan: list[tuple[str, bool, bool, dict[str, str] | None]] = [
                ("single", False, False, None),
                ("single, Idempotency-Key", True, False, None),
                (f"batch of {BATCH_SIZE}", False, True, None),
                (f"batch of {BATCH_SIZE}, keys", True, True, None),
            ]
            if args.traced_sampling > 0:
                # Before the batches: after them, PostgreSQL's autovacuum and checkpoints of
                # the rows they wrote (and the relay marked published) fell in its window.
                await sink.start()
                traced = sink.environment(args.traced_sampling)
                plan.insert(2, (f"single, traced {args.traced_sampling:.0%}", False, False, traced))
            common = {
                "seconds": args.seconds,
                "max_requests": args.max_requests,
                "profile": args.profile,
            }
            # A short unmeasured run after each start: each process's first requests open
            # connections and load code.
            warm_up = {**common, "seconds": 2, "profile": None, "connections": args.connections}
            tracing: dict[str, str] | None = None
            await drive(stack, "warm-up", keyed=False, batch=False, **warm_up)
            for name, keyed, batch, wanted in plan:
                if args.only not in name:
                    continue
                if wanted != tracing:
                    tracing = wanted
                    stack.start_servers(args.processes, tracing)
                    await drive(stack, "warm-up", keyed=False, batch=False, **warm_up)
                connections = args.batch_connections if batch else args.connections
                rows.append(
                    await drive(
                        stack, name, keyed=keyed, batch=batch, connections=connections, **common
                    )
                )
                print(json.dumps(rows[-1]), flush=True)
        finally:
            stack.stop()
            await sink.stop()
    load_after = os.getloadavg()
    print(
        f"\nwebhook-hub ingest over HTTP on {platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, {args.processes} API process(es) (serve "
        f"--reuse-port), {'no worker' if args.no_worker else '1 worker (relay on)'}, "
        f"PostgreSQL fsync on, wrk at {args.connections} connections "
        f"({args.batch_connections} for batches), {args.seconds} s per row; load average "
        f"before {load_before[0]:.2f}, after {load_after[0]:.2f} (1 min)\n"
    )
    print(table(rows))
    print(
        "\ntargets: single ≥ 3,000 events/s with p99 < 50 ms; batches ≥ 20,000 events/s "
        "(2 API processes, fsync on, the same 2 cores as the workers)"
    )
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=2, help="API processes on the port")
    parser.add_argument("--seconds", type=float, default=10, help="length of each row")
    parser.add_argument("--connections", type=int, default=32, help="requests in flight")
    parser.add_argument("--batch-connections", type=int, default=4, help="batch requests in flight")
    parser.add_argument(
        "--max-requests", type=int, default=200_000, help="at most this many requests per row"
    )
    parser.add_argument(
        "--profile", type=Path, help="record each API process with py-spy into this folder"
    )
    parser.add_argument("--no-worker", action="store_true", help="no worker (relay off)")
    parser.add_argument("--only", default="", help="only the rows whose name contains this")
    parser.add_argument(
        "--traced-sampling",
        type=float,
        default=1.0,
        help="the single row again with tracing at this sampling ratio (0: not run)",
    )
    args = parser.parse_args()
    if not wrk_installed():
        print("wrk is not installed: `make bench` installs it (apt-get install wrk)")
        return 2
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
