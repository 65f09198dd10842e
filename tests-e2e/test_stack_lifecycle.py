"""`make run`'s launcher stopped the way a terminal stops it, and started again after a SIGKILL.

Ctrl-C in a terminal sends SIGINT to the whole foreground process group (make, uv, python), and
uv passes it on as well: the launcher gets it twice. Each test starts its own stack, in its own
process group, with its own PostgreSQL and NATS (the launcher's, not the session's servers).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
from servicekit.embedded.network import free_port, port_open

ROOT = Path(__file__).resolve().parents[1]
SERVICE_PREFIXES = ("WEBHOOK_HUB_", "SCRAPER_MANAGER_", "COMMERCE_CONTENT_")


@dataclass
class RunningStack:
    process: subprocess.Popen[bytes]
    output: Path
    summary: dict[str, Any]

    def descendants(self) -> list[psutil.Process]:
        return psutil.Process(self.process.pid).children(recursive=True)

    def service_ports(self) -> list[int]:
        return [int(info["url"].rsplit(":", 1)[1]) for info in self.summary["services"].values()]


def start_stack(
    data_dir: Path, server_ports: dict[str, int], output: Path, started: list[psutil.Process]
) -> RunningStack:
    """The launcher on servers of its own (no DATABASE_URL/NATS_URL/SMTP_URL), leader of a new
    process group as a shell's foreground job is; returns once it wrote its ready file."""
    ready = data_dir.parent / "ready.json"
    ready.unlink(missing_ok=True)
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(SERVICE_PREFIXES)
        and key not in {"DATABASE_URL", "NATS_URL", "SMTP_URL"}
    }
    process = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "deploy" / "local" / "stack.py"),
            "--data-dir",
            str(data_dir),
            "--ephemeral",
            "--free-ports",
            "--postgres-port",
            str(server_ports["postgres"]),
            "--nats-port",
            str(server_ports["nats"]),
            "--smtp-port",
            str(server_ports["smtp"]),
            "--ready-file",
            str(ready),
        ],
        env=env,
        stdout=output.open("ab"),
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        cwd=ROOT,
        start_new_session=True,
    )
    started.append(psutil.Process(process.pid))
    deadline = time.monotonic() + 240
    while not ready.exists():
        if process.poll() is not None:
            raise AssertionError(
                f"the stack exited with {process.returncode}:\n{output.read_text()}"
            )
        if time.monotonic() > deadline:
            raise AssertionError(f"the stack was not ready in time:\n{output.read_text()}")
        time.sleep(0.5)
    return RunningStack(process, output, json.loads(ready.read_text()))


@pytest.fixture
def started() -> Iterator[list[psutil.Process]]:
    """Every process a test's stacks started; whatever a failing test leaves is killed, with
    the children it has by then (a stack that never got ready included)."""
    processes: list[psutil.Process] = []
    yield processes
    for process in processes:
        if process.is_running():  # same pid and start time: still the one we started
            for child in process.children(recursive=True):
                child.kill()
            process.kill()


@pytest.fixture
def server_ports() -> dict[str, int]:
    return {"postgres": free_port(), "nats": free_port(), "smtp": free_port()}


def open_ports(ports: list[int]) -> list[int]:
    return [port for port in ports if port_open("127.0.0.1", port)]


@pytest.mark.timeout(300)
def test_two_ctrl_c_stop_every_process_within_15_s_without_a_traceback(
    tmp_path: Path, server_ports: dict[str, int], started: list[psutil.Process]
) -> None:
    stack = start_stack(tmp_path / "data", server_ports, tmp_path / "stack.log", started)
    children = stack.descendants()
    started.extend(children)
    assert len(children) >= 8  # PostgreSQL, NATS, three APIs, three workers

    os.killpg(stack.process.pid, signal.SIGINT)
    time.sleep(0.3)  # the second one arrives during the shutdown
    os.killpg(stack.process.pid, signal.SIGINT)
    stack.process.wait(15)

    _, alive = psutil.wait_procs(children, timeout=2)
    assert [p.pid for p in alive] == []
    assert open_ports([*server_ports.values(), *stack.service_ports()]) == []
    output = stack.output.read_text()
    assert "Traceback" not in output, output
    assert stack.process.returncode == 0, output


@pytest.mark.timeout(600)  # two starts of the whole stack
def test_a_stack_killed_with_sigkill_is_cleared_away_by_the_next_start(
    tmp_path: Path, server_ports: dict[str, int], started: list[psutil.Process]
) -> None:
    data = tmp_path / "data"
    first = start_stack(data, server_ports, tmp_path / "first.log", started)
    left_behind = first.descendants()
    started.extend(left_behind)
    first.process.send_signal(signal.SIGKILL)
    first.process.wait(10)
    # The servers outlived their launcher and hold their ports (the SMTP sink lives in it).
    servers = [server_ports["postgres"], server_ports["nats"]]
    assert open_ports(servers) == servers

    second = start_stack(data, server_ports, tmp_path / "second.log", started)
    started.extend(second.descendants())

    for info in second.summary["services"].values():
        assert httpx.get(f"{info['url']}/readyz", timeout=5).status_code == 200
    _, alive = psutil.wait_procs(left_behind, timeout=5)
    assert [p.pid for p in alive] == []
    os.killpg(second.process.pid, signal.SIGINT)
    assert second.process.wait(15) == 0
