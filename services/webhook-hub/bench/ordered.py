"""`make bench` row of ordered delivery by key (issue 32, item 3): the drain of a backlog to
one subscription ordered by `event.data.key` against the same drain unordered, on the same
setup.

Starts embedded PostgreSQL and NATS, real `webhook-hub worker` processes (`--workers`, two by
default: ordering must hold across processes) and a receiver on 127.0.0.1 (this file with
`--serve`, pinned to the last core) that checks each key's events arrive in publication
order: per key, an event numbered below one already received is out of order (a repeat of
the last one is a duplicate, which at-least-once allows). Events are published in order
(for n, for each of the `--keys` keys) while the dispatch consumer is paused; it then resumes
and the workers empty the backlog. Prints each drain's deliveries/s, the out-of-order count
(must be 0; the unordered drain's is printed too, to show that without ordering the order is
not kept) and the target line "ordered >= 50 % of unordered drain: met|MISSED".
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import nats
import psycopg
from aiohttp import web
from servicekit.db.admin import database_url_for, ensure_database
from servicekit.db.migrations import upgrade
from servicekit.embedded.network import free_port, wait_for_port
from servicekit.events import new_event_id
from servicekit.events.stream import ensure_events_stream
from servicekit.settings import ServiceSettings
from servicekit.signing import generate_secret
from webhook_hub.dispatch.loop import DISPATCH_CONSUMER

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from run import MIGRATIONS, PUBLISH_WINDOW, Bench, met, table  # noqa: E402  (sibling module)

KEY_EXPRESSION = "event.data.key"
TARGET_RATIO = 0.5


# --- the receiver (a process of its own) ----------------------------------------------------


def serve(port: int) -> None:
    """Per path (one per drain): distinct (key, n) received, posts, out-of-order arrivals,
    first and last arrival (wall clock)."""
    paths: dict[str, dict[str, Any]] = {}

    def state(path: str) -> dict[str, Any]:
        return paths.setdefault(
            path,
            {"last": {}, "seen": set(), "posts": 0, "out_of_order": 0, "first": 0.0, "at": 0.0},
        )

    async def accept(request: web.Request) -> web.Response:
        body = json.loads(await request.read())
        data = body.get("data") or {}
        key, n = data.get("key"), data.get("n")
        if key is None or n is None:
            return web.Response(status=204)  # the subscription's test event
        now = time.time()
        s = state(request.path)
        s["posts"] += 1
        s["first"] = s["first"] or now
        s["at"] = now
        last = s["last"].get(key, -1)
        if n < last:
            s["out_of_order"] += 1
        elif n > last:
            s["last"][key] = n
        s["seen"].add((key, n))
        return web.Response(status=204)

    async def stats(request: web.Request) -> web.Response:
        s = state(request.query["path"])
        return web.json_response(
            {
                "distinct": len(s["seen"]),
                "posts": s["posts"],
                "out_of_order": s["out_of_order"],
                "first_at": s["first"],
                "last_at": s["at"],
            }
        )

    app = web.Application()
    app.router.add_get("/stats", stats)
    app.router.add_post("/{tail:.*}", accept)
    web.run_app(app, host="127.0.0.1", port=port, access_log=None, print=None)


# --- the drains -----------------------------------------------------------------------------


class OrderedBench(Bench):
    def start(self) -> None:
        self.postgres.start()
        self.nats.start()
        self.database_url = database_url_for(self.postgres.url, "webhook_hub_bench")
        ensure_database(self.database_url)
        upgrade(MIGRATIONS, self.database_url)
        cores = os.cpu_count() or 1
        self.receiver_kind = "ordered"
        self.receiver = subprocess.Popen(
            [sys.executable, __file__, "--serve", str(self.receiver_port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=lambda: os.sched_setaffinity(0, {cores - 1}),
        )
        wait_for_port("127.0.0.1", self.receiver_port, 30)

    def subscribe_one(self, event_type: str, path: str, ordering: dict[str, Any] | None) -> None:
        with psycopg.connect(self.database_url) as conn:
            conn.execute(
                "INSERT INTO consumers (owner, id, created_at) VALUES ('bench', %s, now())"
                " ON CONFLICT DO NOTHING",
                (uuid.uuid4(),),
            )
            row = conn.execute("SELECT id FROM consumers WHERE owner='bench'").fetchone()
            assert row is not None
            conn.execute(
                "INSERT INTO subscriptions (id, consumer_id, owner, endpoint_url, secret,"
                " events, is_active, headers, timeout_seconds, created_at, updated_at, ordering)"
                " VALUES (%s, %s, 'bench', %s, %s, %s, true, '{}', 10, now(), now(), %s)",
                (
                    uuid.uuid4(),
                    row[0],
                    f"http://127.0.0.1:{self.receiver_port}{path}",
                    generate_secret(),
                    [event_type],
                    None if ordering is None else json.dumps(ordering),
                ),
            )

    def path_stats(self, path: str) -> dict[str, Any]:
        url = f"http://127.0.0.1:{self.receiver_port}/stats?path={path}"
        with urllib.request.urlopen(url, timeout=30) as response:
            return dict(json.loads(response.read()))

    async def publish_keyed(self, event_type: str, keys: int, per_key: int) -> None:
        """Event n of every key, then n + 1 of every key...: each key's events in order."""
        client = await nats.connect(self.nats.url)
        js = client.jetstream()
        await ensure_events_stream(js, ServiceSettings())
        acknowledged = 0
        total = keys * per_key
        done = asyncio.Event()

        async def on_ack(_msg: Any) -> None:
            nonlocal acknowledged
            acknowledged += 1
            if acknowledged >= total:
                done.set()

        inbox = client.new_inbox()
        await client.subscribe(f"{inbox}.*", cb=on_ack)
        sent = 0
        for n in range(per_key):
            for key in range(keys):
                event_id = str(new_event_id())
                body = (
                    f'{{"specversion":"1.0","id":"{event_id}","source":"bench",'
                    f'"type":"{event_type}","time":"2026-11-29T00:00:00Z",'
                    f'"datacontenttype":"application/json",'
                    f'"data":{{"key":"k{key}","n":{n}}}}}'
                ).encode()
                # Published one after another (each acknowledged in turn by the stream, which
                # numbers them): the stream's order is this order.
                await client.publish(
                    f"events.{event_type}",
                    body,
                    reply=f"{inbox}.{sent}",
                    headers={"Nats-Msg-Id": event_id},
                )
                sent += 1
                while sent - acknowledged >= PUBLISH_WINDOW:  # noqa: ASYNC110
                    await asyncio.sleep(0.001)
        await asyncio.wait_for(done.wait(), 120)
        await client.close()

    async def all_acknowledged(self, deadline: float) -> float:
        """When the dispatch consumer had every event acknowledged (asked every 50 ms)."""
        client = await nats.connect(self.nats.url)
        try:
            js = client.jetstream()
            while time.time() < deadline:
                info = await js.consumer_info(ServiceSettings().events_stream, DISPATCH_CONSUMER)
                if not info.num_pending and not info.num_ack_pending:
                    return time.time()
                await asyncio.sleep(0.05)
            return deadline
        finally:
            await client.close()

    async def drain(
        self,
        name: str,
        ordering: dict[str, Any] | None,
        keys: int,
        per_key: int,
        workers: int,
        budget: float,
    ) -> dict[str, Any]:
        event_type = f"bench.o{uuid.uuid4().hex[:8]}"
        path = f"/{name}-{event_type}"  # each drain counted apart
        self.subscribe_one(event_type, path, ordering)
        self.stop_workers()
        await self.workers_waiting(0)
        for _ in range(workers):
            self.start_worker()
        await self.workers_waiting(workers)
        await self.dispatch_paused(True)
        expected = keys * per_key
        try:
            await self.publish_keyed(event_type, keys, per_key)
        finally:
            await self.dispatch_paused(False)
        resumed = time.time()
        deadline = resumed + budget
        acknowledged = asyncio.create_task(self.all_acknowledged(deadline))
        stats = self.path_stats(path)
        while stats["distinct"] < expected and time.time() < deadline:
            await asyncio.sleep(0.2)
            stats = self.path_stats(path)
        dispatched = await acknowledged
        elapsed = max(stats["last_at"] - resumed, 1e-9)
        result = {
            "drain": name,
            "keys": keys if ordering is not None else "-",
            "events": expected,
            "workers": workers,
            "deliveries_per_s": round(stats["distinct"] / elapsed),
            "seconds": round(elapsed, 2),
            # Until every event was acknowledged: dispatched, its deliveries stored.
            "dispatched_s": round(dispatched - resumed, 2),
            "lost": expected - stats["distinct"],
            "dup": stats["posts"] - stats["distinct"],
            "out_of_order": stats["out_of_order"],
        }
        print(json.dumps(result), flush=True)
        return result


async def main_async(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="webhook-hub-ordered-") as workdir:
        # fsync on, as `make bench`'s other rows.
        bench = OrderedBench(Path(workdir), durable=True, python_receiver=True)
        bench.receiver_port = free_port()
        try:
            bench.start()
            rows = []
            orderings = {"unordered": None, "ordered": {"key": KEY_EXPRESSION}}
            for _ in range(args.rounds):
                for name in args.drains.split(","):
                    rows.append(
                        await bench.drain(
                            name,
                            orderings[name],
                            args.keys,
                            args.per_key,
                            args.workers,
                            args.budget,
                        )
                    )
        finally:
            bench.stop()
    print()
    print(table(rows))
    unordered = [r["deliveries_per_s"] for r in rows if r["drain"] == "unordered"]
    ordered = [r["deliveries_per_s"] for r in rows if r["drain"] == "ordered"]
    if not unordered or not ordered:
        return 0  # one kind only (`--drains`): its rows are the figures
    ratio = (sum(ordered) / len(ordered)) / max(sum(unordered) / len(unordered), 1)
    out_of_order = sum(r["out_of_order"] for r in rows if r["drain"] == "ordered")
    lost = sum(r["lost"] for r in rows)
    print()
    print(f"ordered / unordered drain: {ratio:.0%}")
    print(f"out of order (ordered drains): {out_of_order}  lost: {lost}")
    print(f"target: ordered >= 50 % of unordered drain: {met(ratio >= TARGET_RATIO)}")
    print(f"target: every key's events in publication order: {met(out_of_order == 0)}")
    return 0 if out_of_order == 0 and lost == 0 else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--per-key", type=int, default=20)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument(
        "--drains", default="unordered,ordered", help="which drains, in order (comma separated)"
    )
    parser.add_argument("--budget", type=float, default=180.0, help="seconds per drain at most")
    args = parser.parse_args()
    if args.serve:
        serve(args.serve)
        return 0
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
