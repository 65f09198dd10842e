"""The bare sign-and-POST loops: the ceiling each HTTP client sets, nothing of the engine.

Each loop signs a Standard Webhooks body and POSTs it with `concurrency` requests in flight
over keep-alive connections; the figures are requests per second and the CPU this process
spent per request (less sensitive than throughput to other load on the machine).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from pyreqwest.client import ClientBuilder
from servicekit.signing import generate_secret, webhook_headers
from webhook_hub.delivery_engine.http1 import OriginPool, header_lines

EVENT_TYPE = "bench.happened"
Post = Callable[[bytes, dict[str, str]], Awaitable[None]]


def _signed(n: int, secret: str) -> tuple[bytes, dict[str, str]]:
    body = json.dumps(
        {
            "type": EVENT_TYPE,
            "timestamp": "2026-11-22T00:00:00Z",
            "data": {"n": n, "sent_at": time.time()},
        }
    ).encode()
    headers = {"content-type": "application/json", **webhook_headers(f"msg_{n}", body, [secret])}
    return body, headers


async def _drive(post: Post, requests: int, concurrency: int) -> dict[str, Any]:
    secret = generate_secret()
    queue: asyncio.Queue[int] = asyncio.Queue()
    for n in range(requests):
        queue.put_nowait(n)

    async def sender() -> None:
        while not queue.empty():
            body, headers = _signed(queue.get_nowait(), secret)
            await post(body, headers)

    started, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(sender() for _ in range(concurrency)))
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    return {
        "requests": requests,
        "per_s": round(requests / elapsed),
        "cpu_us": round(cpu / requests * 1e6, 1),
    }


async def aiohttp_loop(url: str, requests: int, concurrency: int) -> dict[str, Any]:
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as http:

        async def post(body: bytes, headers: dict[str, str]) -> None:
            async with http.post(url, data=body, headers=headers) as response:
                await response.read()

        return await _drive(post, requests, concurrency)


async def pyreqwest_loop(url: str, requests: int, concurrency: int) -> dict[str, Any]:
    """A streamed answer read to at most 4 KiB (the engine's sender before `http1`)."""
    client = ClientBuilder().follow_redirects(False).timeout(timedelta(seconds=10)).build()
    async with client:

        async def post(body: bytes, headers: dict[str, str]) -> None:
            request = client.post(url).headers(headers).body_bytes(body).build_streamed()
            async with request as response:
                await response.body_reader.read(4096)

        return await _drive(post, requests, concurrency)


async def http1_loop(url: str, requests: int, concurrency: int) -> dict[str, Any]:
    """As the engine's sender uses it: one origin's pool of kept-alive connections, an answer
    read to at most 4 KiB."""
    parts = urlsplit(url)
    pool = OriginPool(
        scheme=parts.scheme,
        host=parts.hostname or "",
        port=parts.port or 80,
        address=parts.hostname,
        user_agent="bench",
        connect_timeout=5.0,
        tls=None,
        max_idle=concurrency,
        body_limit=4096,
    )
    target = parts.path or "/"

    async def post(body: bytes, headers: dict[str, str]) -> None:
        await pool.post(target, header_lines(headers), body, 10.0)

    try:
        return await _drive(post, requests, concurrency)
    finally:
        pool.close()


LOOPS = {"aiohttp": aiohttp_loop, "pyreqwest": pyreqwest_loop, "http1": http1_loop}


def main() -> None:
    import argparse

    import uvloop

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--concurrency", type=int, default=64)

    async def run(args: argparse.Namespace) -> None:
        for name, loop in LOOPS.items():
            print(name, await loop(args.url, args.requests, args.concurrency), flush=True)

    uvloop.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
