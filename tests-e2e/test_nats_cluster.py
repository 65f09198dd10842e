"""webhook-hub on a 3-node NATS JetStream cluster (as Kubernetes runs it), the `EVENTS` stream
on 3 replicas: the node leading the stream is SIGKILLed in the middle of 2,000 deliveries, and
every event still reaches its subscriber, signed, under one `webhook-id`, with the API, the
workers' relay and dispatch reconnecting to the other nodes by themselves.

The stack here is `deploy/local/stack.py --nats-cluster --services webhook-hub` (its own
PostgreSQL, the cluster, webhook-hub's API and two workers): the hub alone, since events
submitted through its producer API take the whole path (outbox, relay, `EVENTS`, dispatch,
delivery) and the other services' relays are the same servicekit code."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import nats
import pytest
from conftest import ServiceInfo, local_stack
from figures import record
from flows import bearer, register_event_type, subscribe
from nats.aio.client import Client as NatsClient
from nats.js.api import StreamInfo
from processes import workers
from receivers import Received, Receiver, eventually

EVENTS = 2000
# The leader is killed once this many have arrived: production is still under way, so the
# relay publishes through the leader change as dispatch and delivery go on.
KILL_AFTER = 400
STACK_START_SECONDS = 60
DISPATCH_CONSUMER = "webhook-hub-dispatch"


@dataclass(frozen=True)
class ClusterStack:
    hub: ServiceInfo
    nats_url: str
    nodes: dict[str, int]  # JetStream server name -> pid
    pid: int
    log: Path
    logs: Path  # each process's log

    def reconnected(self) -> list[str]:
        """The processes that logged reconnecting to NATS."""
        return sorted(
            path.stem for path in self.logs.glob("*.log") if "NATS reconnected" in path.read_text()
        )


@pytest.fixture
def cluster_stack(tmp_path: Path) -> Iterator[ClusterStack]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("WEBHOOK_HUB_", "SCRAPER_MANAGER_", "COMMERCE_CONTENT_", "OTEL_"))
        and key not in {"DATABASE_URL", "NATS_URL", "SMTP_URL"}
    }
    env.update(
        {
            "WEBHOOK_HUB_EVENTS_STREAM_REPLICAS": "3",
            "WEBHOOK_HUB_RETRY_SCHEDULE_SECONDS": "[1, 2, 4, 8, 15, 30]",
            "WEBHOOK_HUB_RETRY_JITTER": "0",
        }
    )
    log = tmp_path / "stack.log"
    options = ["--data-dir", str(tmp_path / "data"), "--nats-cluster", "--services", "webhook-hub"]
    with local_stack(options, env, log, STACK_START_SECONDS) as (pid, summary):
        info = summary["services"]["webhook-hub"]
        hub = ServiceInfo(
            "webhook-hub", info["url"], info["admin_key"], info["database_url"], info["workers"]
        )
        nodes = {node["name"]: node["pid"] for node in summary["nats_nodes"]}
        yield ClusterStack(hub, summary["nats_url"], nodes, pid, log, tmp_path / "data" / "logs")


@pytest.fixture
async def operator(cluster_stack: ClusterStack) -> AsyncIterator[NatsClient]:
    """A client of the cluster (any node), to read and move its leaders as an operator would."""

    async def expected(exc: Exception) -> None:
        """Its node may be the one killed: reconnecting is expected, not an error to print."""

    client = await nats.connect(
        servers=cluster_stack.nats_url.split(","),
        max_reconnect_attempts=-1,
        reconnect_time_wait=0.5,
        error_cb=expected,
    )
    yield client
    await client.close()


async def stream_info(client: NatsClient, timeout: float = 30) -> tuple[StreamInfo, str]:
    """`EVENTS`' info and leader, once it has one (none while one is elected)."""
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(Exception):  # a request the killed node took, no leader yet
            info = await client.jetstream(timeout=2).stream_info("EVENTS")
            if info.cluster is not None and info.cluster.leader:
                return info, info.cluster.leader
        if time.monotonic() > deadline:
            raise AssertionError(f"EVENTS has no leader after {timeout} s")
        await asyncio.sleep(0.2)


async def consumer_leader(client: NatsClient) -> str | None:
    """The node leading dispatch's durable consumer (None while one is elected)."""
    with contextlib.suppress(Exception):
        info = await client.jetstream(timeout=2).consumer_info("EVENTS", DISPATCH_CONSUMER)
        return info.cluster.leader if info.cluster is not None else None
    return None


async def lead_dispatch_from(client: NatsClient, node: str, timeout: float = 30) -> None:
    """Move the leadership of dispatch's durable consumer (a leader of its own) to `node`,
    as `nats consumer cluster step-down --preferred` does, so killing `node` takes both."""
    subject = f"$JS.API.CONSUMER.LEADER.STEPDOWN.EVENTS.{DISPATCH_CONSUMER}"
    request = json.dumps({"placement": {"preferred": node}}).encode()
    deadline = time.monotonic() + timeout
    while True:
        if await consumer_leader(client) == node:
            return
        with contextlib.suppress(Exception):  # while one is elected
            await client.request(subject, request, timeout=5)
        if time.monotonic() > deadline:
            raise AssertionError(f"dispatch's consumer not led from {node} after {timeout} s")
        await asyncio.sleep(0.5)


async def produce(http: httpx.AsyncClient, hub: ServiceInfo, event_type: str, count: int) -> None:
    """`count` producer events through the hub's API, 20 at a time (the API never needs
    NATS to accept one: its outbox holds it)."""
    gate = asyncio.Semaphore(20)

    async def one(n: int) -> None:
        async with gate:
            response = await http.post(
                f"{hub.url}/webhooks/events",
                json={"type": event_type, "data": {"seq": n}},
                headers=bearer(hub.admin_key),
            )
            assert response.status_code == 202, response.text

    await asyncio.gather(*(one(n) for n in range(count)))


async def test_killing_the_events_stream_leader_loses_no_event_and_sends_each_under_one_id(
    cluster_stack: ClusterStack, operator: NatsClient, http: httpx.AsyncClient, receiver: Receiver
) -> None:
    hub = cluster_stack.hub
    event_type = f"cluster{uuid.uuid4().hex[:6]}.sent"
    await register_event_type(http, hub, event_type)
    subscription = await subscribe(http, hub, receiver.url, [event_type])
    stream, leader = await stream_info(operator)
    assert stream.config.num_replicas == 3
    assert leader in cluster_stack.nodes
    await lead_dispatch_from(operator, leader)
    workers_before = {p.pid for p in workers(cluster_stack.pid, "webhook-hub")}
    assert len(workers_before) == 2

    def ours() -> list[Received]:
        """The deliveries of the test's events (the subscription's test event aside)."""
        return [r for r in receiver.received if r.json().get("type") == event_type]

    production = asyncio.create_task(produce(http, hub, event_type, EVENTS))
    await eventually(lambda: len(ours()) >= KILL_AFTER, 60, what=f"{KILL_AFTER} deliveries made")
    _, leader = await stream_info(operator)  # found again as the kill comes
    dispatch_led_from = await consumer_leader(operator)
    os.kill(cluster_stack.nodes[leader], signal.SIGKILL)
    killed_at = time.monotonic()
    delivered_before_kill = len(ours())
    accepting_at_kill = not production.done()

    async def new_leader() -> tuple[str, float]:
        while True:
            _, now = await stream_info(operator)
            if now != leader:
                return now, time.monotonic() - killed_at
            await asyncio.sleep(0.2)

    (elected, elected_after), _ = await asyncio.gather(new_leader(), production)

    def distinct_events() -> int:
        return len({r.json()["data"]["seq"] for r in ours()})

    await eventually(
        lambda: distinct_events() == EVENTS, 90, interval=0.5, what="every event delivered"
    )
    all_delivered_after = time.monotonic() - killed_at
    ids_by_seq: dict[int, set[str]] = {}
    for request, payload in zip(
        receiver.received, receiver.verified(subscription["secret"]), strict=True
    ):  # verified: raises on a bad signature
        if payload["type"] == event_type:
            ids_by_seq.setdefault(payload["data"]["seq"], set()).add(request.id)
    assert set(ids_by_seq) == set(range(EVENTS))
    assert all(len(ids) == 1 for ids in ids_by_seq.values())  # one webhook-id per event
    requests = Counter(r.id for r in ours())
    assert len(requests) == EVENTS
    # Reconnected by themselves: the same worker processes, none restarted, each connected.
    assert {p.pid for p in workers(cluster_stack.pid, "webhook-hub")} == workers_before
    for worker in hub.workers:
        ready = await http.get(f"{worker['probe_url']}/readyz")
        assert ready.json()["checks"]["nats"] is True, ready.text
    assert delivered_before_kill < EVENTS  # killed in the middle
    record(
        "NATS cluster, EVENTS stream leader SIGKILLed during 2000 deliveries",
        sent=EVENTS,
        delivered=len(ids_by_seq),
        distinct_webhook_ids=len(requests),
        duplicates=sum(requests.values()) - len(requests),
        delivered_before_kill=delivered_before_kill,
        api_still_accepting_at_kill=accepting_at_kill,
        killed=leader,
        new_leader=elected,
        dispatch_consumer_leader_killed_too=dispatch_led_from == leader,
        new_leader_seen_s=round(elected_after, 1),
        all_delivered_s_after_kill=round(all_delivered_after, 1),
        # Clients spread over the nodes at random: those on the killed one moved.
        reconnected=cluster_stack.reconnected(),
    )
