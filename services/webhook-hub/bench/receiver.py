"""A minimal webhook receiver for the benchmark: answers 204, records the latency of each
delivery from the `sent_at` its event carries, and reports at `GET /stats`."""

from __future__ import annotations

import json
import sys
import time

from aiohttp import web

latencies: list[float] = []
seen: set[tuple[str, str]] = set()
posts = 0
first_at = 0.0
last_at = 0.0


async def bare(request: web.Request) -> web.Response:
    """The bare loops' requests: not deliveries, so not counted."""
    await request.read()
    return web.Response(status=204)


async def receive(request: web.Request) -> web.Response:
    global posts, first_at, last_at
    body = await request.read()
    now = time.time()
    posts += 1
    first_at = first_at or now
    last_at = now
    data = json.loads(body).get("data", {})
    if "sent_at" in data:
        latencies.append(now - data["sent_at"])
        seen.add((str(data.get("n")), request.path))
    return web.Response(status=204)


async def stats(request: web.Request) -> web.Response:
    return web.json_response(
        {
            "posts": posts,
            "distinct": len(seen),
            "first_at": first_at,
            "last_at": last_at,
            "latencies": latencies,
        }
    )


async def reset(request: web.Request) -> web.Response:
    global posts, first_at, last_at
    latencies.clear()
    seen.clear()
    posts, first_at, last_at = 0, 0.0, 0.0
    return web.Response(status=204)


def main() -> None:
    port = int(sys.argv[1])
    app = web.Application()
    app.router.add_get("/stats", stats)
    app.router.add_post("/reset", reset)
    app.router.add_post("/bare", bare)
    app.router.add_post("/{tail:.*}", receive)
    web.run_app(app, host="127.0.0.1", port=port, access_log=None, print=None)


if __name__ == "__main__":
    main()
