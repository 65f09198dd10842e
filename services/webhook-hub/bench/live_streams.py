"""Live streams under load: the hub API's and a portal page's latency with and without 3,000
open live views of the delivery log (`GET /portal/endpoints/{id}/deliveries/live`).

Starts an embedded PostgreSQL and NATS in a temporary folder, migrates, makes OWNERS owners
(each with a key, one endpoint and DELIVERIES deliveries), starts a real `webhook-hub serve`
on 127.0.0.1 with the process cap raised to the streams it opens (the session and owner caps
at their defaults, 5 and 20), signs SESSIONS_PER_OWNER sessions in per owner (one-time
links), and measures, each as REQUESTS sequential requests (p50 / p99, ms):

- `GET /webhooks/subscriptions` (the API, with a key) and `GET /portal/endpoints/{id}` (a
  page: its charts and log) with no stream open;
- the same with 3,000 streams open and idle (heartbeats only);
- the same while every endpoint gets a delivery each second, announced as the worker does
  (every stream wakes, looks and sends its rows each second);

then one session asking for 1,000 streams (the flood of issue 30): how many were refused.
Bounded in time (every phase has a deadline) and stops everything by itself.
Run: `uv run --frozen python services/webhook-hub/bench/live_streams.py [--streams 3000]`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx
import nats
import psycopg
from servicekit.auth import AccessLevel
from servicekit.auth.repository import ApiKeyRepository
from servicekit.db.admin import database_url_for, ensure_database
from servicekit.db.engine import create_session_factory
from servicekit.db.migrations import upgrade
from servicekit.embedded.nats import EmbeddedNats
from servicekit.embedded.network import free_port
from servicekit.embedded.postgres import EmbeddedPostgres
from servicekit.live import encode_keys
from sqlalchemy.ext.asyncio import create_async_engine
from webhook_hub.deliveries.live import LIVE_SUBJECT

MIGRATIONS = Path(__file__).resolve().parent.parent / "migrations"
SESSIONS_PER_OWNER = 4
STREAMS_PER_SESSION = 5  # the default session cap
DELIVERIES = 200
REQUESTS = 300
FLOOD = 1000

SEED = """
INSERT INTO consumers (owner, id, created_at) VALUES (%(owner)s, gen_random_uuid(), now());
INSERT INTO subscriptions (id, consumer_id, owner, endpoint_url, secret, events, is_active,
  headers, timeout_seconds, created_at, updated_at)
VALUES (%(id)s, (SELECT id FROM consumers WHERE owner = %(owner)s), %(owner)s,
  'http://127.0.0.1:9/hook', 'c2VjcmV0', ARRAY['*'], true, '{}', 10, now(), now());
INSERT INTO deliveries (id, subscription_id, event_id, event_type, payload, event_time, status,
  attempts, created_at, first_status_code, first_duration_ms)
SELECT gen_random_uuid(), %(id)s, gen_random_uuid(), 'order.paid', '{"id": 1}',
  now() - i * interval '1 minute', 'succeeded', 1, now() - i * interval '1 minute', 200, 30
FROM generate_series(1, %(deliveries)s) AS i;
"""
# What a recorded batch leaves: one new delivery for each endpoint.
NEW_DELIVERIES = """
INSERT INTO deliveries (id, subscription_id, event_id, event_type, payload, event_time, status,
  attempts, created_at, first_status_code, first_duration_ms)
SELECT gen_random_uuid(), id, gen_random_uuid(), 'order.paid', '{"id": 1}', now(), 'succeeded',
  1, now(), 200, 30 FROM subscriptions
"""


class Owner:
    def __init__(self, name: str, key: str, endpoint: str) -> None:
        self.name = name
        self.key = key
        self.endpoint = endpoint
        self.cookies: list[str] = []  # one Cookie header per session


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(int(q * len(ordered)), len(ordered) - 1)]


async def seed(database_url: str, owners: int) -> list[Owner]:
    made = []
    with psycopg.connect(database_url, autocommit=True) as conn:
        for n in range(owners):
            name, endpoint = f"owner-{n}", str(uuid.uuid4())
            values = {"owner": name, "id": endpoint, "deliveries": DELIVERIES}
            for statement in SEED.strip().split(";\n"):
                conn.execute(statement, values)
            made.append(Owner(name, "", endpoint))
    engine = create_async_engine(database_url.replace("postgresql://", "postgresql+psycopg://"))
    async with create_session_factory(engine)() as session, session.begin():
        for owner in made:
            _, owner.key = await ApiKeyRepository(session).create(
                prefix="whk", owner=owner.name, level=AccessLevel.READ
            )
    await engine.dispose()
    return made


async def sign_in(http: httpx.AsyncClient, owner: Owner) -> str:
    """A session of `owner` through a one-time link; its Cookie header."""
    link = await http.post(
        "/webhooks/portal-links", json={}, headers={"Authorization": f"Bearer {owner.key}"}
    )
    path = httpx.URL(link.json()["url"]).path
    async with httpx.AsyncClient(base_url=http.base_url, timeout=30) as browser:
        landing = await browser.get(path)
        token = re.search(r'name="csrf_token" value="([^"]+)"', landing.text)
        assert token is not None
        opened = await browser.post(path, data={"csrf_token": token.group(1)})
        assert opened.status_code == 303, opened.text
        return "; ".join(f"{name}={value}" for name, value in browser.cookies.items())


class Streams:
    """Live views held open on raw sockets (a browser's EventSource, without the browser)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.readers: list[asyncio.Task[None]] = []
        self.writers: list[asyncio.StreamWriter] = []
        self.statuses: dict[int, int] = {}

    async def open(self, path: str, cookie: str) -> int:
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
        writer.write(
            f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n"
            f"Cookie: {cookie}\r\n\r\n".encode()
        )
        await writer.drain()
        status = int((await reader.readline()).split()[1])
        self.statuses[status] = self.statuses.get(status, 0) + 1
        if status != 200:
            writer.close()
            return status
        self.writers.append(writer)
        self.readers.append(asyncio.create_task(self._drain(reader)))
        return status

    @staticmethod
    async def _drain(reader: asyncio.StreamReader) -> None:
        # Read and drop what the server streams, so that its writes never wait on us.
        with contextlib.suppress(Exception):
            while await reader.read(65536):
                continue

    async def close(self) -> None:
        for writer in self.writers:
            writer.close()
        for task in self.readers:
            task.cancel()
        await asyncio.gather(*self.readers, return_exceptions=True)
        self.readers, self.writers = [], []


async def latencies(call: Callable[[], Awaitable[httpx.Response]]) -> tuple[float, float]:
    timings = []
    for _ in range(REQUESTS):
        started = time.perf_counter()
        response = await call()
        timings.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, response.status_code
    return statistics.median(timings), percentile(timings, 0.99)


async def measure(
    http: httpx.AsyncClient, owner: Owner, label: str, rows: list[tuple[str, str]]
) -> None:
    api = await latencies(
        lambda: http.get(
            "/webhooks/subscriptions", headers={"Authorization": f"Bearer {owner.key}"}
        )
    )
    page = await latencies(
        lambda: http.get(
            f"/portal/endpoints/{owner.endpoint}", headers={"Cookie": owner.cookies[0]}
        )
    )
    rows.append((label, f"{api[0]:8.1f} {api[1]:8.1f} {page[0]:9.1f} {page[1]:9.1f}"))
    print(f"  {label}: done", flush=True)


def start_serve(env: dict[str, str]) -> subprocess.Popen[bytes]:
    executable = str(Path(sys.executable).parent / "webhook-hub")
    return subprocess.Popen([executable, "serve"], env=env, stdout=subprocess.DEVNULL)


async def main_async(args: argparse.Namespace) -> int:
    owners_needed = -(-args.streams // (SESSIONS_PER_OWNER * STREAMS_PER_SESSION))
    with tempfile.TemporaryDirectory(prefix="live-bench-") as tmp:
        postgres = EmbeddedPostgres(Path(tmp) / "pg", durable=False)
        postgres.start()
        broker = EmbeddedNats(Path(tmp) / "nats")
        broker.start()
        serve: subprocess.Popen[bytes] | None = None
        try:
            database_url = database_url_for(postgres.url, "webhook_hub")
            ensure_database(database_url)
            upgrade(MIGRATIONS, database_url)
            owners = await seed(database_url, owners_needed)
            port = free_port()
            env = {
                **os.environ,
                "WEBHOOK_HUB_DATABASE_URL": database_url,
                "WEBHOOK_HUB_NATS_URL": broker.url,
                "WEBHOOK_HUB_PORT": str(port),
                "WEBHOOK_HUB_LOG_LEVEL": "WARNING",
                "WEBHOOK_HUB_LIVE_STREAMS_PER_PROCESS": str(args.streams + 100),
            }
            serve = start_serve(env)
            base = f"http://127.0.0.1:{port}"
            limits = httpx.Limits(max_connections=50)
            async with httpx.AsyncClient(base_url=base, timeout=60, limits=limits) as http:
                for _ in range(300):
                    with contextlib.suppress(httpx.HTTPError):
                        if (await http.get("/readyz")).status_code == 200:
                            break
                    await asyncio.sleep(0.1)
                sessions = await asyncio.gather(
                    *(sign_in(http, o) for o in owners for _ in range(SESSIONS_PER_OWNER))
                )
                for n, owner in enumerate(owners):
                    owner.cookies = list(
                        sessions[n * SESSIONS_PER_OWNER : (n + 1) * SESSIONS_PER_OWNER]
                    )
                probe = owners[0]
                rows: list[tuple[str, str]] = []
                await measure(http, probe, "no stream open", rows)

                streams = Streams(port)
                wanted = [
                    (f"/portal/endpoints/{o.endpoint}/deliveries/live", cookie)
                    for o in owners
                    for cookie in o.cookies
                    for _ in range(STREAMS_PER_SESSION)
                ][: args.streams]
                started = time.perf_counter()
                for batch in range(0, len(wanted), 200):
                    await asyncio.gather(
                        *(streams.open(p, c) for p, c in wanted[batch : batch + 200])
                    )
                opened_in = time.perf_counter() - started
                print(f"  {streams.statuses} in {opened_in:.1f} s", flush=True)
                await asyncio.sleep(2)  # their first looks done
                await measure(http, probe, f"{len(streams.writers)} streams open, idle", rows)

                changing = True
                notices = await nats.connect(broker.url)
                keys = encode_keys(o.endpoint for o in owners)

                async def deliveries_every_second() -> None:
                    with psycopg.connect(database_url, autocommit=True) as conn:
                        while changing:
                            conn.execute(NEW_DELIVERIES)
                            await notices.publish(LIVE_SUBJECT, keys)
                            await asyncio.sleep(1.0)

                churn = asyncio.create_task(deliveries_every_second())
                await measure(
                    http, probe, f"{len(streams.writers)} streams, all updated each second", rows
                )
                changing = False
                await churn
                await notices.close()
                await streams.close()

                # The flood: one session asks for FLOOD live views of its endpoint.
                flood = Streams(port)
                victim = owners[-1]
                await asyncio.sleep(2)  # the closed streams' slots given back
                started = time.perf_counter()
                await asyncio.gather(
                    *(
                        flood.open(
                            f"/portal/endpoints/{victim.endpoint}/deliveries/live",
                            victim.cookies[0],
                        )
                        for _ in range(FLOOD)
                    )
                )
                flood_seconds = time.perf_counter() - started
                await flood.close()

            print()
            print(f"webhook-hub live streams, {REQUESTS} sequential requests each (ms)")
            print(f"{'':44} {'api p50':>8} {'api p99':>8} {'page p50':>9} {'page p99':>9}")
            for label, figures in rows:
                print(f"{label:44} {figures}")
            print(
                f"opening {len(wanted)} streams ({owners_needed} owners x {SESSIONS_PER_OWNER} "
                f"sessions x {STREAMS_PER_SESSION}): {streams.statuses} in {opened_in:.1f} s"
            )
            print(
                f"one session asking for {FLOOD} streams: {flood.statuses} in {flood_seconds:.1f} s"
            )
        finally:
            if serve is not None:
                serve.terminate()
                try:
                    serve.wait(30)
                except subprocess.TimeoutExpired:
                    serve.kill()
            broker.stop()
            postgres.stop()
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=3000)
    parser.add_argument("--deadline", type=float, default=600.0, help="seconds before giving up")
    args = parser.parse_args()
    return asyncio.run(asyncio.wait_for(main_async(args), args.deadline))


if __name__ == "__main__":
    raise SystemExit(main())
