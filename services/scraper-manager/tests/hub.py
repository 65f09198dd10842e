"""A real webhook-hub for the webhook tests: its migrations and its worker (the process that
answers `hub.subscriptions.*` over NATS) run as the operator runs them, on a database of its
own on the test PostgreSQL server and on the tests' NATS."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
from servicekit.db.admin import database_url_for, drop_database

BIN = Path(sys.executable).parent


@contextmanager
def webhook_hub_worker(
    postgres_server_url: str,
    nats_url: str,
    *,
    name: str = "hub_for_scrapers",
    serve_port: int | None = None,
) -> Iterator[str]:
    """Yields the hub's database URL while its worker runs; with `serve_port`, its API (and
    portal) too, on that loopback port and as its PUBLIC_URL, answering /readyz first."""
    database_url = database_url_for(postgres_server_url, f"{name}_{os.getpid()}")
    env = {k: v for k, v in os.environ.items() if not k.startswith("WEBHOOK_HUB_")}
    env.update(
        WEBHOOK_HUB_DATABASE_URL=database_url,
        WEBHOOK_HUB_NATS_URL=nats_url,
        WEBHOOK_HUB_LOG_JSON="false",
    )
    if serve_port is not None:
        env.update(
            WEBHOOK_HUB_HOST="127.0.0.1",
            WEBHOOK_HUB_PORT=str(serve_port),
            WEBHOOK_HUB_PUBLIC_URL=f"http://127.0.0.1:{serve_port}",
        )
    drop_database(database_url)
    subprocess.run(
        [str(BIN / "webhook-hub"), "migrate", "--create-database"],
        env=env,
        check=True,
        capture_output=True,
        timeout=120,
    )
    commands = ["worker"] if serve_port is None else ["worker", "serve"]
    with tempfile.TemporaryFile() as log:
        processes = [
            subprocess.Popen(
                [str(BIN / "webhook-hub"), command], env=env, stdout=log, stderr=subprocess.STDOUT
            )
            for command in commands
        ]
        try:
            if serve_port is not None:
                _ready(f"http://127.0.0.1:{serve_port}/readyz", processes[1])
            yield database_url
        finally:
            for process in processes:
                process.terminate()
            for process in processes:
                try:
                    process.wait(30)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
    drop_database(database_url)


def _ready(url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert process.poll() is None, f"webhook-hub serve exited ({process.returncode})"
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url, timeout=1).status_code == 200:
                return
        time.sleep(0.1)
    raise AssertionError(f"webhook-hub serve was not ready at {url} in 60 s")


async def eventually_true(check: Callable[[], Awaitable[bool]], timeout: float, what: str) -> None:
    """Polls an async predicate until it holds, failing with `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await check():
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"{what} did not happen within {timeout} s")
