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

    def probe_urls(self) -> dict[str, str]:
        return {
            worker["label"]: worker["probe_url"]
            for info in self.summary["services"].values()
            for worker in info["workers"]
            if "probe_url" in worker
        }


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


def open_ports(ports: list[int]) -> list[int]:
    return [port for port in ports if port_open("127.0.0.1", port)]


@dataclass(frozen=True)
class Lifecycle:
    """What one run of the story showed: a stack SIGKILLed, the next start on its data
    directory, and that second stack stopped by two Ctrl-C (SIGINT to its process group)."""

    leftovers_alive: list[int]
    readiness: dict[str, int]
    # What each worker's /metrics answered, with no probe flag given (the default).
    worker_metrics: dict[str, str]
    children: int
    stop_seconds: float
    alive_after_stop: list[int]
    open_after_stop: list[int]
    output: str
    returncode: int | None


@pytest.fixture(scope="module")
def lifecycle(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lifecycle]:
    """Two starts of the whole stack serve both tests (each start costs a minute or more)."""
    work = tmp_path_factory.mktemp("lifecycle")
    data = work / "data"
    ports = {"postgres": free_port(), "nats": free_port(), "smtp": free_port()}
    started: list[psutil.Process] = []
    try:
        first = start_stack(data, ports, work / "first.log", started)
        left_behind = first.descendants()
        started.extend(left_behind)
        first.process.send_signal(signal.SIGKILL)
        first.process.wait(10)
        # The servers outlived their launcher and hold their ports (the SMTP sink lives in it).
        servers = [ports["postgres"], ports["nats"]]
        assert open_ports(servers) == servers

        second = start_stack(data, ports, work / "second.log", started)
        children = second.descendants()
        started.extend(children)
        readiness = {
            name: httpx.get(f"{info['url']}/readyz", timeout=5).status_code
            for name, info in second.summary["services"].items()
        }
        worker_metrics = {
            label: httpx.get(f"{url}/metrics", timeout=5).text
            for label, url in second.probe_urls().items()
        }
        probe_ports = [int(url.rsplit(":", 1)[1]) for url in second.probe_urls().values()]
        _, leftovers = psutil.wait_procs(left_behind, timeout=5)

        began = time.monotonic()
        os.killpg(second.process.pid, signal.SIGINT)
        time.sleep(0.3)  # the second one arrives during the shutdown
        os.killpg(second.process.pid, signal.SIGINT)
        second.process.wait(15)
        stop_seconds = time.monotonic() - began
        _, alive = psutil.wait_procs(children, timeout=2)
        yield Lifecycle(
            leftovers_alive=[p.pid for p in leftovers],
            readiness=readiness,
            worker_metrics=worker_metrics,
            children=len(children),
            stop_seconds=stop_seconds,
            alive_after_stop=[p.pid for p in alive],
            open_after_stop=open_ports([*ports.values(), *second.service_ports(), *probe_ports]),
            output=second.output.read_text(),
            returncode=second.process.returncode,
        )
    finally:
        # Whatever a failure left, a stack that never got ready included, with its children.
        for process in started:
            if process.is_running():  # same pid and start time: still the one we started
                for child in process.children(recursive=True):
                    child.kill()
                process.kill()


@pytest.mark.timeout(600)  # two starts of the whole stack, paid once for the module
def test_a_stack_killed_with_sigkill_is_cleared_away_by_the_next_start(
    lifecycle: Lifecycle,
) -> None:
    assert lifecycle.readiness == {
        "webhook-hub": 200,
        "scraper-manager": 200,
        "commerce-content": 200,
    }
    assert lifecycle.leftovers_alive == []


@pytest.mark.timeout(600)
def test_every_worker_serves_its_metrics_by_default(lifecycle: Lifecycle) -> None:
    assert sorted(lifecycle.worker_metrics) == [
        "commerce-content-worker",
        "scraper-manager-worker",
        "webhook-hub-worker",
    ]
    for text in lifecycle.worker_metrics.values():
        assert "outbox_backlog" in text
    assert "scraper_run_duration_seconds" in lifecycle.worker_metrics["scraper-manager-worker"]
    assert "metrics: http://127.0.0.1:" in lifecycle.output


@pytest.mark.timeout(600)
def test_two_ctrl_c_stop_every_process_within_15_s_without_a_traceback(
    lifecycle: Lifecycle,
) -> None:
    assert lifecycle.children >= 8  # PostgreSQL, NATS, three APIs, three workers
    assert lifecycle.stop_seconds < 15
    assert lifecycle.alive_after_stop == []
    assert lifecycle.open_after_stop == []
    assert "Traceback" not in lifecycle.output, lifecycle.output
    assert lifecycle.returncode == 0, lifecycle.output
