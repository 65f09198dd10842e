"""Running a service's installed console script as an operator does: its own process, its
own environment, stdout and stderr read apart."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from servicekit.db.admin import database_url_for, drop_database, ensure_database

SCRIPT_SECONDS = 60


def own_environment(prefix: str, **settings: str) -> dict[str, str]:
    """This process's environment without the service's variables (`prefix`, as
    `WEBHOOK_HUB_`), with `settings` set under it: `DATABASE_URL=...` gives
    `WEBHOOK_HUB_DATABASE_URL`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(prefix)}
    env.update({f"{prefix}{name}": value for name, value in settings.items()})
    return env


async def run_console_script(
    command: str, *args: str, env: dict[str, str] | None = None
) -> tuple[int, str, str]:
    """The exit code, stdout and stderr of the console script `command` (installed beside this
    interpreter) run with `args`."""
    process = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).parent / command),
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), SCRIPT_SECONDS)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


@contextmanager
def empty_database(server_url: str, name: str) -> Iterator[str]:
    """The URL of a database without tables on the PostgreSQL at `server_url`, named `name`
    and this process's id; dropped after."""
    url = database_url_for(server_url, f"{name}_{os.getpid()}")
    drop_database(url)
    ensure_database(url)
    try:
        yield url
    finally:
        drop_database(url)
