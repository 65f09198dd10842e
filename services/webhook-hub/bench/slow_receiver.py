"""Receivers that take their time, for the bench's slow-receiver scenarios: one process
listening on several loopback ports, each request answered 204 after a random wait in
[min_ms, max_ms] (so a delivery occupies its connection as a real receiver's would), and
each delivery's receipt recorded (its path, the event's number and `sent_at`, the arrival
time, when the request arrived, and the answer's, after the wait). `GET /stats` on any port
answers the count of distinct deliveries so far; on SIGTERM the process writes every record
to `--dump` (JSON) and exits, so a receiver can be stopped (its port then refuses
connections) without losing what it received.

    python slow_receiver.py --min-ms 50 --max-ms 300 --dump records.json PORT [PORT ...]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from aiohttp import web

# [path, n, sent_at, arrived_at, answered_at] per delivery received (duplicates included).
records: list[tuple[str, int, float, float, float]] = []
seen: set[tuple[str, int]] = set()


def handler(min_ms: float, max_ms: float) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def receive(request: web.Request) -> web.Response:
        body = await request.read()
        now = time.time()
        data = json.loads(body).get("data", {})
        if max_ms > 0:
            await asyncio.sleep(random.uniform(min_ms, max_ms) / 1000)  # noqa: S311
        if "sent_at" in data:
            n = int(data.get("n", -1))
            records.append((request.path, n, float(data["sent_at"]), now, time.time()))
            seen.add((request.path, n))
        return web.Response(status=204)

    return receive


async def stats(request: web.Request) -> web.Response:
    return web.json_response({"posts": len(records), "distinct": len(seen)})


def dump_and_exit(dump: Path) -> None:
    dump.write_text(json.dumps(records))
    os._exit(0)


async def serve(min_ms: float, max_ms: float, ports: list[int], dump: Path) -> None:
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, dump_and_exit, dump)
    app = web.Application()
    app.router.add_get("/stats", stats)
    app.router.add_post("/{tail:.*}", handler(min_ms, max_ms))
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    for port in ports:
        # A deep backlog: a bench's burst of new connections is not refused at accept.
        await web.TCPSite(runner, "127.0.0.1", port, backlog=4096).start()
    await asyncio.Event().wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--min-ms", type=float, default=50)
    parser.add_argument("--max-ms", type=float, default=300)
    parser.add_argument("--dump", type=Path, required=True)
    parser.add_argument("ports", type=int, nargs="+")
    args = parser.parse_args()
    asyncio.run(serve(args.min_ms, args.max_ms, args.ports, args.dump))


if __name__ == "__main__":
    main()
