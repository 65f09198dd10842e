"""Ordered delivery by key (issue 32, item 3), against real receivers and a real worker: a
key's events are attempted one at a time in publication order, a failing one holds the ones
behind it (and only those), and the log names who held whom and for how long."""

from __future__ import annotations

import asyncio
import signal
import subprocess
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from nats.js import JetStreamContext
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine
from webhook_hub.settings import Settings

from tests.factories import consumer_subscribed, publish_event, worker_process
from tests.keyed_receiver import KeyedReceiver

# The key expression of the tests' ordered subscriptions: the key the receiver reads too.
ORDER_BY_KEY: dict[str, Any] = {"key": "event.data.key"}
KEYS = 20
PER_KEY = 30


@pytest.fixture
async def receiver() -> AsyncIterator[KeyedReceiver]:
    server = KeyedReceiver()
    await server.start()
    yield server
    await server.stop()


@dataclass
class Ordered:
    """The hub's API and JetStream, for ordered subscriptions of the keyed `receiver`."""

    client: httpx.AsyncClient
    engine: AsyncEngine
    js: JetStreamContext
    receiver: KeyedReceiver

    async def subscription(self, ordering: dict[str, Any]) -> dict[str, Any]:
        _, created = await consumer_subscribed(
            self.client,
            self.engine,
            self.receiver.url,
            ["order.created"],
            ordering=ordering,
            timeout_seconds=2,
        )
        return created

    async def publish(self, key: str, n: int) -> None:
        await publish_event(self.js, "order.created", {"key": key, "n": n})


@pytest.fixture
def ordered(
    client: httpx.AsyncClient, db_engine: AsyncEngine, js: JetStreamContext, receiver: KeyedReceiver
) -> Ordered:
    return Ordered(client, db_engine, js, receiver)


async def ordered_rows(
    db_engine: AsyncEngine, subscription_id: str, *, until: Callable[[list[Any]], bool]
) -> list[Any]:
    """The subscription's ordered deliveries by sequence, once all are done and `until` holds
    (the receiver's answer is recorded a flush after it arrives)."""
    query = text(
        "SELECT id, order_key, order_seq, held_by, held_since, held_until, status"
        " FROM deliveries WHERE subscription_id = :id AND order_key IS NOT NULL"
        " ORDER BY order_seq"
    )
    for _ in range(200):
        async with db_engine.connect() as connection:
            rows = list((await connection.execute(query, {"id": subscription_id})).all())
        if until(rows) and all(row.status != "pending" for row in rows):
            return rows
        await asyncio.sleep(0.05)
    raise AssertionError(f"the deliveries were not all done: {rows}")


async def test_a_failing_event_holds_the_events_behind_it_until_it_succeeds(
    worker: Settings,
    ordered: Ordered,
    receiver: KeyedReceiver,
) -> None:
    created = await ordered.subscription({})
    assert created["ordering"] == {"key": None}
    receiver.decide = lambda _key, n, before: 500 if n == 2 and before < 3 else 200
    for n in range(8):
        await ordered.publish("all", n)

    await receiver.wait_until(lambda: len(set(receiver.delivered("all"))) == 8)

    assert receiver.delivered("all") == list(range(8))
    attempts_of_2 = [a.status for a in receiver.arrivals if a.key == "all" and a.n == 2]
    assert attempts_of_2 == [500, 500, 500, 200]
    assert not receiver.overlaps


async def test_a_failing_key_holds_only_its_own_events_while_other_keys_flow(
    worker: Settings,
    ordered: Ordered,
    receiver: KeyedReceiver,
) -> None:
    await ordered.subscription(ORDER_BY_KEY)

    # Key A's first event is refused until every event of key B has arrived, then accepted.
    def b_done() -> bool:
        return len(set(receiver.delivered("B"))) == 5

    def decide(key: str, n: int, before: int) -> int:
        return 500 if key == "A" and n == 0 and (before < 3 or not b_done()) else 200

    receiver.decide = decide
    for n in range(5):
        await ordered.publish("A", n)
        await ordered.publish("B", n)

    await receiver.wait_until(lambda: len(set(receiver.delivered("A"))) == 5)

    assert receiver.delivered("B") == list(range(5))
    assert receiver.delivered("A") == list(range(5))
    first_a_success = next(a.at for a in receiver.arrivals if a.key == "A" and a.status == 200)
    last_b = max(a.at for a in receiver.arrivals if a.key == "B")
    assert last_b < first_a_success  # B went on while A was held
    a_attempts = [(a.n, a.status) for a in receiver.arrivals if a.key == "A"]
    assert all(n == 0 for n, status in a_attempts if status != 200)
    assert not receiver.overlaps


async def test_a_delivery_held_behind_another_names_it_and_how_long(
    worker: Settings,
    ordered: Ordered,
    receiver: KeyedReceiver,
) -> None:
    created = await ordered.subscription({"key": None})
    receiver.decide = lambda _key, n, before: 500 if n == 0 and before < 2 else 200
    for n in range(3):
        await ordered.publish("held", n)
    await receiver.wait_until(lambda: len(set(receiver.delivered("held"))) == 3)

    rows = await ordered_rows(ordered.engine, created["id"], until=lambda rows: len(rows) == 3)
    assert [row.status for row in rows] == ["succeeded"] * 3
    head, *behind = rows
    assert head.held_by is None
    for row in behind:
        assert row.held_by == head.id
        assert row.held_since < row.held_until


def start_worker(settings: Settings) -> subprocess.Popen[bytes]:
    return worker_process(
        settings,
        {
            "WEBHOOK_HUB_RETRY_SCHEDULE_SECONDS": "[0.2, 0.2, 0.2, 0.2, 0.2]",
            "WEBHOOK_HUB_RETRY_JITTER": "0",
        },
    )


async def test_two_worker_processes_keep_each_keys_order(
    service_settings: Settings,
    ordered: Ordered,
    receiver: KeyedReceiver,
) -> None:
    created = await ordered.subscription(ORDER_BY_KEY)
    # Every tenth event of each key fails once: its key waits, the others go on.
    receiver.decide = lambda _key, n, before: 500 if n % 10 == 3 and before == 0 else 200
    receiver.delay = 0.002
    keys = [f"k{k}" for k in range(KEYS)]
    workers = [start_worker(service_settings) for _ in range(2)]
    try:
        for n in range(PER_KEY):
            for key in keys:
                await ordered.publish(key, n)
        await receiver.wait_until(
            lambda: all(len(set(receiver.delivered(key))) == PER_KEY for key in keys), 120
        )
        rows = await ordered_rows(
            ordered.engine, created["id"], until=lambda rows: len(rows) == KEYS * PER_KEY
        )
    finally:
        for worker in workers:
            worker.send_signal(signal.SIGTERM)
        # Not blocking the loop: the receiver answers on it.
        for worker in workers:
            await asyncio.to_thread(worker.wait, 30)

    for key in keys:
        assert receiver.delivered(key) == list(range(PER_KEY)), key
    assert not receiver.overlaps
    assert {row.status for row in rows} == {"succeeded"}
