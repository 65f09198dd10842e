"""A minimal webhook receiver for the benchmark: answers 204, records the latency of each
delivery from the `sent_at` its event carries, and reports at `GET /stats`. With a second
argument, a file to which each delivery appends `<receipt time> <webhook-id>`, as the nginx
receiver of `soak.py` logs them (written every second)."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from aiohttp import web

latencies: list[float] = []
seen: set[tuple[str, str]] = set()
posts = 0
first_at = 0.0
last_at = 0.0
ids: list[str] = []


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
    ids.append(f"{now:.3f} {request.headers.get('webhook-id', '-')}\n")
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


def write_ids(path: Path) -> None:
    with path.open("a") as log:
        log.writelines(ids)
    ids.clear()


def ids_log(path: Path | None) -> Callable[[web.Application], AsyncIterator[None]]:
    """The app's cleanup context: the ids received, appended to `path` every second."""

    async def flushing(app: web.Application) -> AsyncIterator[None]:
        async def loop() -> None:
            while True:
                await asyncio.sleep(1)
                if path is not None:
                    write_ids(path)
                else:
                    ids.clear()

        task = asyncio.create_task(loop())
        yield
        task.cancel()
        if path is not None:
            write_ids(path)

    return flushing


def main() -> None:
    port = int(sys.argv[1])
    app = web.Application()
    app.cleanup_ctx.append(ids_log(Path(sys.argv[2]) if len(sys.argv) > 2 else None))
    app.router.add_get("/stats", stats)
    app.router.add_post("/reset", reset)
    app.router.add_post("/bare", bare)
    app.router.add_post("/{tail:.*}", receive)
    web.run_app(app, host="127.0.0.1", port=port, access_log=None, print=None)


if __name__ == "__main__":
    main()
