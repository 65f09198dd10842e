"""A real webhook-hub for the webhook tests: its migrations and its worker (the process that
answers `hub.subscriptions.*` over NATS) run as the operator runs them, on a database of its
own on the test PostgreSQL server and on the tests' NATS."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from servicekit.db.admin import database_url_for, drop_database

BIN = Path(sys.executable).parent


@contextmanager
def webhook_hub_worker(postgres_server_url: str, nats_url: str) -> Iterator[str]:
    """Yields the hub's database URL while its worker runs."""
    database_url = database_url_for(postgres_server_url, f"hub_for_scrapers_{os.getpid()}")
    env = {k: v for k, v in os.environ.items() if not k.startswith("WEBHOOK_HUB_")}
    env.update(
        WEBHOOK_HUB_DATABASE_URL=database_url,
        WEBHOOK_HUB_NATS_URL=nats_url,
        WEBHOOK_HUB_LOG_JSON="false",
    )
    drop_database(database_url)
    subprocess.run(
        [str(BIN / "webhook-hub"), "migrate", "--create-database"],
        env=env,
        check=True,
        capture_output=True,
        timeout=120,
    )
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(
            [str(BIN / "webhook-hub"), "worker"], env=env, stdout=log, stderr=subprocess.STDOUT
        )
        try:
            yield database_url
        finally:
            process.terminate()
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
    drop_database(database_url)


async def eventually_true(check: Callable[[], Awaitable[bool]], timeout: float, what: str) -> None:
    """Polls an async predicate until it holds, failing with `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await check():
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"{what} did not happen within {timeout} s")
