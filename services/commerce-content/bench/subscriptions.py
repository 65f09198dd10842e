"""Live order status over GraphQL subscriptions at scale: 2,000 open `orderStatusChanged`
subscriptions on one API process, each order paid through the real path, time to reach its
subscriber and the process's memory.

Starts embedded PostgreSQL and NATS, loads `--orders` pending orders (one buyer each, one
line, stock reserved), starts `commerce-content serve` (one uvicorn process) and
`commerce-content worker` (its outbox relay), then on loopback:

1. reads the API process's RSS once it has answered a query and a subscription (idle);
2. opens one graphql-transport-ws socket per order, signed in with the buyer's JWT at
   `connection_init`, subscribes to `orderStatusChanged` and waits for its first answer
   (`PENDING`), `--connect-concurrency` sockets at a time;
3. pays `--events` of the orders at `--rate` per second: a Stripe-signed
   `checkout.session.completed` POSTed to the payment webhook, which marks the order paid
   and writes `order.paid` to the outbox in its transaction; the worker's relay publishes
   it on NATS; the API process's broker wakes the order's subscription, which reads the
   order and sends it. The time is from sending the notification to the subscriber
   receiving `PAID`;
4. prints the latency percentiles, the RSS idle / with the sockets open / at its highest
   while events flow, and whether the targets (p99 < 200 ms, RSS at most 300 MiB above
   idle) are met.

Bounded: every wait has a deadline (`--timeout`), and everything started is stopped.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import psycopg
import uvloop
from commerce_content.identity.dependencies import jwt_codec
from commerce_content.settings import Settings
from servicekit.db.admin import database_url_for, ensure_database
from servicekit.db.migrations import upgrade
from servicekit.embedded.nats import EmbeddedNats
from servicekit.embedded.network import free_port, wait_for_port
from servicekit.embedded.postgres import EmbeddedPostgres
from servicekit.signing import sign_stripe
from websockets.asyncio.client import ClientConnection, connect

HERE = Path(__file__).resolve().parent
MIGRATIONS = HERE.parent / "migrations"
BIN = Path(sys.executable).parent
PROTOCOL = "graphql-transport-ws"
ORDER_STATUS = "subscription($id: ID!) { orderStatusChanged(orderId: $id) { id status paidAt } }"
WEBHOOK = "/api/orders/webhook/stripe"
PRICE_CENTS = 500
P99_TARGET_MS = 200.0
RSS_TARGET_MIB = 300.0


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


@dataclass(frozen=True)
class Buyer:
    user_id: int
    order_id: uuid.UUID
    session_id: str


def load_orders(database_url: str, count: int) -> list[Buyer]:
    """`count` buyers, each with one pending order holding its stock, as checkout leaves it."""
    with psycopg.connect(database_url) as conn:
        product = conn.execute(
            "INSERT INTO products (name, slug, description, base_price, currency, stock, image,"
            " tags, parent_id, menu_index, published, deleted, created_at, updated_at)"
            " VALUES ('Bench mug', 'bench-mug', '', %s, 'USD', 1000000, '', '{}', 1, 0, true,"
            " false, now(), now()) RETURNING id",
            (PRICE_CENTS / 100,),
        ).fetchone()
        assert product is not None
        with conn.cursor().copy("COPY users (email, name, role, created_at) FROM STDIN") as copy:
            for n in range(count):
                copy.write_row((f"buyer{n}@example.com", f"Buyer {n}", "user", "2026-01-01"))
        users = [row[0] for row in conn.execute("SELECT id FROM users ORDER BY id")][-count:]
        buyers = [Buyer(user, uuid.uuid4(), f"cs_bench_{n}") for n, user in enumerate(users)]
        with conn.cursor().copy(
            "COPY orders (id, status, total, currency, customer_email, user_id,"
            " payment_session_id, payment_url, created_at, stock_reserved_at, expires_at)"
            " FROM STDIN"
        ) as copy:
            for buyer in buyers:
                copy.write_row(
                    (
                        buyer.order_id,
                        "pending",
                        PRICE_CENTS / 100,
                        "USD",
                        f"buyer{buyer.user_id}@example.com",
                        buyer.user_id,
                        buyer.session_id,
                        "https://pay.example/bench",
                        "2026-01-01T00:00:00Z",
                        "2026-01-01T00:00:00Z",
                        "2099-01-01T00:00:00Z",
                    )
                )
        with conn.cursor().copy(
            "COPY order_items (order_id, product_id, name, price, quantity) FROM STDIN"
        ) as copy:
            for buyer in buyers:
                copy.write_row((buyer.order_id, product[0], "Bench mug", PRICE_CENTS / 100, 1))
        conn.execute("ANALYZE")
    return buyers


def order_gid(order_id: uuid.UUID) -> str:
    from commerce_content.graphql_api.ids import global_id

    return global_id("Order", order_id)


def notification(buyer: Buyer) -> bytes:
    return json.dumps(
        {
            "id": f"evt_{uuid.uuid4().hex}",
            "type": "checkout.session.completed",
            "data": {
                "object": {
                    "id": buyer.session_id,
                    "payment_intent": f"pi_{uuid.uuid4().hex[:12]}",
                    "payment_status": "paid",
                    "amount_total": PRICE_CENTS,
                    "currency": "usd",
                    "metadata": {"order_id": str(buyer.order_id)},
                }
            },
        }
    ).encode()


@dataclass
class Watch:
    """One buyer's socket: when their payment was sent and when PAID arrived."""

    buyer: Buyer
    ws: ClientConnection | None = None
    sent_at: float | None = None
    answered_at: float | None = None
    paid_at: float | None = None
    paid: asyncio.Event = field(default_factory=asyncio.Event)


async def first_message(ws: ClientConnection) -> dict[str, Any]:
    while True:
        message = json.loads(await ws.recv())
        if message.get("type") not in ("ping", "pong"):
            return dict(message)


async def open_watch(url: str, token: str, watch: Watch) -> None:
    ws = await connect(url, subprotocols=[PROTOCOL], open_timeout=60)  # type: ignore[list-item]
    watch.ws = ws
    await ws.send(
        json.dumps({"type": "connection_init", "payload": {"Authorization": f"Bearer {token}"}})
    )
    ack = await first_message(ws)
    if ack.get("type") != "connection_ack":
        raise RuntimeError(f"not acknowledged: {ack}")
    payload = {"query": ORDER_STATUS, "variables": {"id": order_gid(watch.buyer.order_id)}}
    await ws.send(json.dumps({"id": "1", "type": "subscribe", "payload": payload}))
    first = await first_message(ws)
    status = first.get("payload", {}).get("data", {}).get("orderStatusChanged", {}).get("status")
    if status != "PENDING":
        raise RuntimeError(f"first answer is not PENDING: {first}")


async def await_paid(watch: Watch) -> None:
    assert watch.ws is not None
    while True:
        message = await first_message(watch.ws)
        data = message.get("payload", {}).get("data") or {}
        if (data.get("orderStatusChanged") or {}).get("status") == "PAID":
            watch.paid_at = time.perf_counter()
            watch.paid.set()
            return


@contextmanager
def sampled_rss(pid: int, every: float = 0.2) -> Iterator[list[float]]:
    """The process's RSS sampled in a thread while the block runs."""
    import threading

    samples: list[float] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            with suppress(OSError, RuntimeError):
                samples.append(rss_mib(pid))
            stop.wait(every)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield samples
    finally:
        stop.set()
        thread.join(5)


async def measure(
    base: str,
    pid: int,
    settings: Settings,
    buyers: list[Buyer],
    *,
    events: int,
    rate: float,
    concurrency: int,
    timeout: float,
) -> dict[str, Any]:
    ws_url = base.replace("http://", "ws://") + "/graphql"
    codec = jwt_codec(settings)
    tokens = {b.user_id: codec.issue(str(b.user_id), {"role": "user"}) for b in buyers}
    secret = settings.payment_webhook_secret.get_secret_value()
    # Idle: the process has served a query and a subscription, so its imports and pools
    # are as they will be.
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"{base}/graphql", json={"query": "{ __typename }"}) as answer,
    ):
        assert answer.status == 200
    warm = Watch(buyers[0])
    await asyncio.wait_for(open_watch(ws_url, tokens[buyers[0].user_id], warm), timeout)
    assert warm.ws is not None
    await warm.ws.close()
    await asyncio.sleep(2)
    idle = rss_mib(pid)

    watches = [Watch(b) for b in buyers]
    gate = asyncio.Semaphore(concurrency)

    async def opened(watch: Watch) -> None:
        async with gate:
            await open_watch(ws_url, tokens[watch.buyer.user_id], watch)

    started = time.perf_counter()
    await asyncio.wait_for(asyncio.gather(*(opened(w) for w in watches)), timeout)
    connect_seconds = time.perf_counter() - started
    await asyncio.sleep(2)
    subscribed = rss_mib(pid)
    # What the open sockets cost while nothing happens (heartbeats included).
    cpu_before, quiet_started = cpu_seconds(pid), time.perf_counter()
    await asyncio.sleep(5)
    quiet_cpu = (cpu_seconds(pid) - cpu_before) / (time.perf_counter() - quiet_started)

    # The measuring client's own 2,000 sockets are long-lived: out of its collector's full
    # passes, so its pauses are not counted as the server's latency.
    gc.collect()
    gc.freeze()
    listeners = [asyncio.create_task(await_paid(w)) for w in watches]
    paying = watches[:events]
    failures = 0
    with sampled_rss(pid) as samples:
        async with aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=64), timeout=aiohttp.ClientTimeout(total=timeout)
        ) as http:

            async def pay(watch: Watch) -> None:
                nonlocal failures
                body = notification(watch.buyer)
                headers = {"Stripe-Signature": sign_stripe(body, secret)}
                watch.sent_at = time.perf_counter()
                async with http.post(f"{base}{WEBHOOK}", data=body, headers=headers) as answer:
                    await answer.read()
                    watch.answered_at = time.perf_counter()
                    if answer.status != 200:
                        failures += 1

            sends = []
            began = time.perf_counter()
            for index, watch in enumerate(paying):
                # A fixed rate: each notification at its time, not after the previous answer.
                delay = began + index / rate - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                sends.append(asyncio.create_task(pay(watch)))
            await asyncio.gather(*sends)
        done, _ = await asyncio.wait(
            [asyncio.create_task(w.paid.wait()) for w in paying], timeout=timeout
        )
    for task in listeners:
        task.cancel()
    await asyncio.gather(*listeners, return_exceptions=True)
    for watch in watches:
        if watch.ws is not None:
            with suppress(Exception):
                await watch.ws.close()
    latencies = [
        (w.paid_at - w.sent_at) * 1000
        for w in paying
        if w.paid_at is not None and w.sent_at is not None
    ]
    answers = [
        (w.answered_at - w.sent_at) * 1000
        for w in paying
        if w.answered_at is not None and w.sent_at is not None
    ]
    onward = [
        (w.paid_at - w.answered_at) * 1000
        for w in paying
        if w.paid_at is not None and w.answered_at is not None
    ]
    return {
        "onward_p50_ms": percentile(onward, 0.50),
        "onward_p99_ms": percentile(onward, 0.99),
        "webhook_p50_ms": percentile(answers, 0.50),
        "webhook_p99_ms": percentile(answers, 0.99),
        "quiet_cpu": quiet_cpu,
        "sockets": len(watches),
        "connect_seconds": connect_seconds,
        "events": len(paying),
        "delivered": len(latencies),
        "failures": failures,
        "p50_ms": percentile(latencies, 0.50),
        "p90_ms": percentile(latencies, 0.90),
        "p99_ms": percentile(latencies, 0.99),
        "max_ms": max(latencies) if latencies else float("nan"),
        "idle_mib": idle,
        "subscribed_mib": subscribed,
        "peak_mib": max([subscribed, *samples]),
        "undelivered": len(paying) - len(done),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--orders", type=int, default=2000, help="open subscriptions")
    parser.add_argument("--events", type=int, default=600, help="orders paid (at most --orders)")
    parser.add_argument("--rate", type=float, default=10.0, help="payments per second")
    parser.add_argument("--connect-concurrency", type=int, default=50)
    parser.add_argument("--timeout", type=float, default=300.0, help="deadline of each phase")
    args = parser.parse_args()
    events = min(args.events, args.orders)
    with tempfile.TemporaryDirectory(prefix="cc-subs-") as tmp:
        workdir = Path(tmp)
        postgres, nats = EmbeddedPostgres(workdir / "pg"), EmbeddedNats(workdir / "nats")
        processes: list[subprocess.Popen[bytes]] = []
        postgres.start()
        nats.start()
        try:
            database_url = database_url_for(postgres.url, "commerce_content_subscriptions")
            ensure_database(database_url)
            upgrade(MIGRATIONS, database_url)
            buyers = load_orders(database_url, args.orders)
            port = free_port()
            base = f"http://127.0.0.1:{port}"
            env = {
                **os.environ,
                "COMMERCE_CONTENT_DATABASE_URL": database_url,
                "COMMERCE_CONTENT_NATS_URL": nats.url,
                "COMMERCE_CONTENT_PORT": str(port),
                "COMMERCE_CONTENT_PUBLIC_BASE_URL": base,
                "COMMERCE_CONTENT_LOG_LEVEL": "WARNING",
                # Throughput, not the per-client limits: the webhook is called from one address.
                "COMMERCE_CONTENT_RATE_LIMIT": "100000000/minute",
                "COMMERCE_CONTENT_GRAPHQL_WS_MAX_CONNECTIONS": str(args.orders + 100),
            }
            for key, value in env.items():
                if key.startswith("COMMERCE_CONTENT_"):
                    os.environ[key] = value
            settings = Settings()
            for command in ("serve", "worker"):
                processes.append(
                    subprocess.Popen(
                        [str(BIN / "commerce-content"), command],
                        env=env,
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                    )
                )
            wait_for_port("127.0.0.1", port, 60)
            results = uvloop.run(
                measure(
                    base,
                    processes[0].pid,
                    settings,
                    buyers,
                    events=events,
                    rate=args.rate,
                    concurrency=args.connect_concurrency,
                    timeout=args.timeout,
                )
            )
        finally:
            for process in processes:
                process.terminate()
            for process in processes:
                with suppress(subprocess.TimeoutExpired):
                    process.wait(20)
            nats.stop()
            postgres.stop()
    report(results, args.rate)


def report(r: dict[str, Any], rate: float) -> None:
    print(
        f"\ncommerce-content subscriptions: {r['sockets']:,} sockets (graphql-transport-ws,"
        f" orderStatusChanged, one order each) on one API process, {os.cpu_count()} cores;"
        f" opened and subscribed in {r['connect_seconds']:.1f} s"
    )
    print(
        f"{'row':<46} {'events':>7} {'delivered':>9} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8}"
        f" {'max ms':>8}"
    )
    print(
        f"{'order.paid (signed webhook -> subscriber)':<46} {r['events']:>7} {r['delivered']:>9}"
        f" {r['p50_ms']:>8.1f} {r['p90_ms']:>8.1f} {r['p99_ms']:>8.1f} {r['max_ms']:>8.1f}"
    )
    print(
        f"  at {rate:g} payments/s; the webhook's own answer p50 {r['webhook_p50_ms']:.1f} ms,"
        f" p99 {r['webhook_p99_ms']:.1f} ms; answers other than 200: {r['failures']}"
    )
    print(
        f"  from the webhook's answer to the subscriber (outbox relay, NATS, the subscription's"
        f" read and send): p50 {r['onward_p50_ms']:.1f} ms, p99 {r['onward_p99_ms']:.1f} ms"
    )
    print(f"API process CPU with the sockets open and no events: {100 * r['quiet_cpu']:.0f} %")
    growth = r["peak_mib"] - r["idle_mib"]
    print(
        f"API process RSS: idle {r['idle_mib']:.0f} MiB, with the sockets open"
        f" {r['subscribed_mib']:.0f} MiB, highest while events flowed {r['peak_mib']:.0f} MiB"
        f" (+{growth:.0f} MiB, {growth * 1024 / r['sockets']:.0f} KiB per socket)"
    )
    delivered = r["undelivered"] == 0
    for what, p99 in (
        ("from the signed notification", r["p99_ms"]),
        ("from the event's commit (the webhook's answer)", r["onward_p99_ms"]),
    ):
        met = p99 < P99_TARGET_MS and delivered
        print(
            f"target p99 < {P99_TARGET_MS:.0f} ms {what}, every event delivered:"
            f" {'met' if met else 'MISSED'} ({p99:.1f} ms)"
        )
    print(
        f"target RSS at most +{RSS_TARGET_MIB:.0f} MiB over idle:"
        f" {'met' if growth <= RSS_TARGET_MIB else 'MISSED'}"
    )
    print(
        json.dumps(
            {
                "p99_ms": round(r["p99_ms"], 1),
                "event_to_subscriber_p99_ms": round(r["onward_p99_ms"], 1),
                "rss_growth_mib": round(growth, 1),
                "delivered": r["delivered"],
                "events": r["events"],
            }
        )
    )


if __name__ == "__main__":
    main()
