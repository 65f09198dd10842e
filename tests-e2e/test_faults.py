"""Faults while events flow: NATS down, a worker killed, the database restarted. Nothing
accepted may be lost; a duplicate may only repeat a delivery with the same `webhook-id`."""

from __future__ import annotations

import asyncio
import signal
import uuid
from collections import defaultdict
from typing import Any

import httpx
from conftest import Stack
from figures import record
from flows import bearer, checkout, register_event_type, stocked_product, subscribe
from processes import workers
from receivers import Receiver, eventually


def delivered_by_key(
    receiver: Receiver, secret: str, event_type: str, key: str
) -> dict[Any, set[str]]:
    """For each value of `data[key]`, the webhook-ids that carried it."""
    seen: dict[Any, set[str]] = defaultdict(set)
    for request, payload in zip(receiver.received, receiver.verified(secret), strict=True):
        if payload.get("type") == event_type:
            seen[payload["data"][key]].add(request.id)
    return seen


def count_of_type(receiver: Receiver, event_type: str) -> int:
    return sum(1 for r in receiver.received if r.json().get("type") == event_type)


async def all_delivered(
    receiver: Receiver, secret: str, event_type: str, count: int, timeout: float = 180
) -> dict[Any, set[str]]:
    """Waits until every `seq` of `count` producer events arrived; webhook-ids by `seq`."""
    await eventually(
        lambda: len(delivered_by_key(receiver, secret, event_type, "seq")) == count,
        timeout,
        interval=0.5,
        what=f"all {count} events delivered",
    )
    return delivered_by_key(receiver, secret, event_type, "seq")


async def produce(http: httpx.AsyncClient, stack: Stack, event_type: str, count: int) -> None:
    """`count` producer events of a type the admin key's owner registers, through
    webhook-hub's API, 20 at a time."""
    await register_event_type(http, stack.hub, event_type)
    gate = asyncio.Semaphore(20)

    async def one(n: int) -> None:
        async with gate:
            response = await http.post(
                f"{stack.hub.url}/webhooks/events",
                json={"type": event_type, "data": {"seq": n}},
                headers={**bearer(stack.hub.admin_key), "Idempotency-Key": uuid.uuid4().hex},
            )
            assert response.status_code == 202, response.text

    await asyncio.gather(*(one(n) for n in range(count)))


async def test_no_order_created_is_lost_while_nats_is_down_for_10_s(
    stack: Stack, http: httpx.AsyncClient, receiver: Receiver
) -> None:
    subscription = await subscribe(http, stack.hub, receiver.url, ["order.created"])
    product = await stocked_product(http, stack.shop, stock=200)
    gate = asyncio.Semaphore(10)
    orders: list[str] = []

    async def buy(n: int) -> None:
        async with gate:
            order = await checkout(http, stack.shop, product["id"], f"burst{n}@example.com")
            orders.append(order["orderId"])

    async def buy_all() -> None:
        await asyncio.gather(*(buy(n) for n in range(200)))

    burst = asyncio.create_task(buy_all())
    await eventually(lambda: len(orders) >= 40, 30, what="the burst under way")
    await asyncio.to_thread(stack.nats.stop)
    await asyncio.sleep(10)
    await asyncio.to_thread(stack.nats.start)
    await burst
    assert len(orders) == 200  # checkout never needed NATS: the outbox holds the events

    def all_arrived() -> bool:
        return set(orders) <= set(
            delivered_by_key(receiver, subscription["secret"], "order.created", "id")
        )

    await eventually(all_arrived, 120, interval=0.5, what="every order.created delivered")
    seen = delivered_by_key(receiver, subscription["secret"], "order.created", "id")
    ours = {order_id: ids for order_id, ids in seen.items() if order_id in set(orders)}
    assert all(len(ids) == 1 for ids in ours.values())  # one webhook-id per event
    requests = sum(
        1
        for r in receiver.received
        if r.json().get("type") == "order.created" and r.json()["data"]["id"] in ours
    )
    record(
        "nats down 10 s during 200 checkouts",
        sent=len(orders),
        delivered=len(ours),
        requests=requests,
        duplicates=requests - len(ours),
    )


async def test_every_event_is_delivered_when_a_worker_is_killed_mid_burst(
    stack: Stack, http: httpx.AsyncClient, receiver: Receiver
) -> None:
    event_type = f"burst{uuid.uuid4().hex[:6]}.sent"
    subscription = await subscribe(http, stack.hub, receiver.url, ["*"])
    await produce(http, stack, event_type, 1000)
    await eventually(
        lambda: count_of_type(receiver, event_type) >= 150, 60, what="deliveries under way"
    )
    victim = workers(stack.pid, "webhook-hub")[0]
    victim.send_signal(signal.SIGKILL)
    seen = await all_delivered(receiver, subscription["secret"], event_type, 1000)
    await eventually(
        lambda: len(workers(stack.pid, "webhook-hub")) == 2, 30, what="the worker restarted"
    )
    assert set(seen) == set(range(1000))
    assert all(len(ids) == 1 for ids in seen.values())
    requests = count_of_type(receiver, event_type)
    record(
        "worker SIGKILL during 1000 deliveries",
        sent=1000,
        delivered=len(seen),
        requests=requests,
        duplicates=requests - len(seen),
    )


async def test_a_database_restart_loses_nothing_and_workers_carry_on(
    stack: Stack, http: httpx.AsyncClient, receiver: Receiver
) -> None:
    event_type = f"restart{uuid.uuid4().hex[:6]}.sent"
    subscription = await subscribe(http, stack.hub, receiver.url, ["*"])
    before = {p.pid for p in workers(stack.pid, "webhook-hub")}
    await produce(http, stack, event_type, 300)
    await eventually(
        lambda: count_of_type(receiver, event_type) >= 30, 60, what="deliveries under way"
    )
    await asyncio.to_thread(stack.postgres.stop)
    await asyncio.sleep(3)
    await asyncio.to_thread(stack.postgres.start)
    seen = await all_delivered(receiver, subscription["secret"], event_type, 300)
    assert {p.pid for p in workers(stack.pid, "webhook-hub")} == before  # no restart needed
    assert all(len(ids) == 1 for ids in seen.values())
    requests = count_of_type(receiver, event_type)
    record(
        "postgres restart during 300 deliveries",
        sent=300,
        delivered=len(seen),
        requests=requests,
        duplicates=requests - len(seen),
    )
