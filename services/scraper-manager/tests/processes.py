"""scraper-manager's `serve` and `worker` as real processes, configured as a test's Settings
are: every field the test set is handed over as a `SCRAPER_MANAGER_*` variable."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
from scraper_manager.settings import Settings
from servicekit.embedded.network import free_port

PREFIX = "SCRAPER_MANAGER_"
# Stopping waits this long for a clean exit (uvicorn drains, the worker finishes its batch).
STOP_SECONDS = 30
READY_SECONDS = 60


@dataclass(frozen=True)
class Processes:
    url: str  # the dashboard and API of `serve`
    worker_probe_url: str  # the worker's /readyz


def environment(settings: Settings) -> dict[str, str]:
    """The fields set on `settings` (not those left at their default) as environment
    variables: text as it is, anything else as JSON, which pydantic-settings parses back."""
    values = settings.model_dump(mode="json", include=settings.model_fields_set)
    env = {k: v for k, v in os.environ.items() if not k.startswith(PREFIX)}
    for name, value in values.items():
        env[f"{PREFIX}{name.upper()}"] = value if isinstance(value, str) else json.dumps(value)
    return env


def _ready(url: str, process: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + READY_SECONDS
    while time.monotonic() < deadline:
        assert process.poll() is None, f"scraper-manager {what} exited ({process.returncode})"
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                return
        time.sleep(0.1)
    raise AssertionError(f"scraper-manager {what} was not ready at {url} in {READY_SECONDS} s")


def _stop(processes: list[subprocess.Popen[bytes]]) -> None:
    for process in processes:
        process.terminate()
    for process in processes:
        try:
            process.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(STOP_SECONDS)


@contextlib.contextmanager
def serve_and_worker(settings: Settings) -> Iterator[Processes]:
    """`scraper-manager serve` and `scraper-manager worker` on free loopback ports, both
    answering /readyz (database and NATS reached) before this yields; terminated after."""
    port, probe_port = free_port(), free_port()
    # Logs go to stderr, and pytest shows a failing test's: warnings and errors are enough.
    configured = settings.model_copy(
        update={
            "host": "127.0.0.1",
            "port": port,
            "worker_probe_port": probe_port,
            "log_level": "WARNING",
        }
    )
    env = environment(configured)
    executable = str(Path(sys.executable).parent / "scraper-manager")
    processes: list[subprocess.Popen[bytes]] = []
    try:
        for command in ("serve", "worker"):
            processes.append(
                subprocess.Popen([executable, command], env=env, stdout=subprocess.DEVNULL)
            )
        found = Processes(f"http://127.0.0.1:{port}", f"http://127.0.0.1:{probe_port}")
        _ready(found.url, processes[0], "serve")
        _ready(found.worker_probe_url, processes[1], "worker")
        yield found
    finally:
        _stop(processes)
