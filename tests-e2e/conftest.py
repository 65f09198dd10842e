"""The whole stack as real processes: `deploy/local/stack.py` in its test mode (temporary
data, free ports, two workers per service, restarts of processes that die, worker probes),
on a PostgreSQL and a NATS server these tests own so they can stop and start them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from otlp import OtlpReceiver
from receivers import Receiver
from servicekit.embedded.nats import EmbeddedNats
from servicekit.embedded.network import free_port
from servicekit.embedded.postgres import EmbeddedPostgres
from standardwebhooks import Webhook  # noqa: F401 - receivers verify with it
from website import website

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
CONTENT_API_KEY = "e2e-content-api-key-0123456789"
# Standard Webhooks secret of the content-saved notifications (base64 of 24 bytes).
CONTENT_WEBHOOK_SECRET = "ZTJlLWNvbnRlbnQtd2ViaG9vay1zZWNyZXQ="
STACK_ENV = {
    "COMMERCE_CONTENT_CONTENT_API_KEY": CONTENT_API_KEY,
    "COMMERCE_CONTENT_CONTENT_WEBHOOK_SECRET": CONTENT_WEBHOOK_SECRET,
    # Fast retries, so the fault tests see redelivery within seconds.
    "WEBHOOK_HUB_RETRY_SCHEDULE_SECONDS": "[1, 2, 4, 8, 15, 30]",
    "WEBHOOK_HUB_RETRY_JITTER": "0",
    "COMMERCE_CONTENT_RATE_LIMIT": "100000/minute",
    "SCRAPER_MANAGER_SCHEDULER_TICK_SECONDS": "0.5",
}


@dataclass(frozen=True)
class ServiceInfo:
    name: str
    url: str
    admin_key: str
    database_url: str
    workers: list[dict[str, str]]

    def cli(self, *args: str) -> str:
        """The service's console script, as an operator runs it; its last output line."""
        prefix = self.name.upper().replace("-", "_") + "_"
        env = {**os.environ, f"{prefix}DATABASE_URL": self.database_url}
        result = subprocess.run(
            [str(BIN / self.name), *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        return result.stdout.strip().splitlines()[-1]


@dataclass(frozen=True)
class Stack:
    services: dict[str, ServiceInfo]
    nats_url: str
    pid: int
    postgres: EmbeddedPostgres
    nats: EmbeddedNats
    # What the launcher wrote to its ready file and printed, as `make run` shows a person.
    summary: dict[str, Any]
    output: Path

    @property
    def hub(self) -> ServiceInfo:
        return self.services["webhook-hub"]

    @property
    def scrapers(self) -> ServiceInfo:
        return self.services["scraper-manager"]

    @property
    def shop(self) -> ServiceInfo:
        return self.services["commerce-content"]


# The whole stack's start, allowed by the `stack` fixture: its own deadline, then the event
# types' (60 s).
STACK_START_SECONDS = 240


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The session's stack starts inside the first test that asks for it, and pytest-timeout
    counts that test's set-up: give that one test the stack's own deadlines on top of the
    usual 120 s (on a loaded 2-core machine the start took more than 120 s, and every e2e
    test then failed at set-up)."""
    for item in items:
        if "stack" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.timeout(STACK_START_SECONDS + 60 + 120))
            return


@pytest.fixture(scope="session")
def servers(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[EmbeddedPostgres, EmbeddedNats]]:
    base = tmp_path_factory.mktemp("servers")
    postgres = EmbeddedPostgres(base / "pg", port=free_port(), durable=True)
    nats = EmbeddedNats(base / "nats", port=free_port())
    postgres.start()
    nats.start()
    try:
        yield postgres, nats
    finally:
        nats.stop()
        postgres.stop()


@pytest.fixture(scope="session")
async def content_receiver() -> AsyncIterator[Receiver]:
    """Where commerce-content sends content-saved notifications (fixed before the stack starts)."""
    receiver = Receiver()
    await receiver.start()
    yield receiver
    await receiver.stop()


@pytest.fixture(scope="session")
async def shop_website() -> AsyncIterator[str]:
    from aiohttp import web

    runner = web.AppRunner(website(), access_log=None)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    yield f"http://127.0.0.1:{port}/"
    await runner.cleanup()


@pytest.fixture(scope="session")
def otlp() -> Iterator[OtlpReceiver]:
    """Where every process of the stack exports its spans (OTLP over HTTP)."""
    receiver = OtlpReceiver()
    receiver.start()
    yield receiver
    receiver.stop()


@pytest.fixture(scope="session")
def stack(
    servers: tuple[EmbeddedPostgres, EmbeddedNats],
    content_receiver: Receiver,
    otlp: OtlpReceiver,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Stack]:
    postgres, nats = servers
    work = tmp_path_factory.mktemp("stack")
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("WEBHOOK_HUB_", "SCRAPER_MANAGER_", "COMMERCE_CONTENT_", "OTEL_"))
    }
    env.update(STACK_ENV)
    env.update(
        {
            "DATABASE_URL": postgres.url,
            "NATS_URL": nats.url,
            "COMMERCE_CONTENT_CONTENT_WEBHOOK_URL": content_receiver.url,
            # Traced as an operator would: only the standard variables.
            "OTEL_EXPORTER_OTLP_ENDPOINT": otlp.url,
            "OTEL_BSP_SCHEDULE_DELAY": "200",
        }
    )
    env.pop("SMTP_URL", None)  # the stack's own SMTP sink
    with local_stack([], env, work / "stack.log", STACK_START_SECONDS) as (pid, summary):
        services = {
            name: ServiceInfo(
                name, info["url"], info["admin_key"], info["database_url"], info["workers"]
            )
            for name, info in summary["services"].items()
        }
        _wait_for_event_types(services["webhook-hub"])
        yield Stack(
            services,
            summary["nats_url"],
            pid,
            postgres,
            nats,
            summary,
            work / "stack.log",
        )


@contextmanager
def local_stack(
    options: list[str], env: dict[str, str], log: Path, start_seconds: float
) -> Iterator[tuple[int, dict[str, Any]]]:
    """`deploy/local/stack.py` as `make run` starts it (ephemeral, on free ports, two workers
    each, supervised, with worker probes) and `options`, its output in `log` and its ready
    file beside it; once ready, its pid and what the ready file says. Stopped as an operator
    stops it (SIGTERM; killed after 60 s)."""
    ready = log.parent / "ready.json"
    with log.open("wb") as output:
        process = subprocess.Popen(
            [
                sys.executable,
                str(ROOT / "deploy" / "local" / "stack.py"),
                "--ephemeral",
                "--free-ports",
                "--ready-file",
                str(ready),
                "--workers",
                "2",
                "--supervise",
                "--worker-probes",
                *options,
            ],
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
        )
    try:
        deadline = time.monotonic() + start_seconds
        while not ready.exists():
            if process.poll() is not None:
                raise RuntimeError(f"the stack exited; see {log}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the stack was not ready in time; see {log}")
            time.sleep(0.3)
        yield process.pid, json.loads(ready.read_text())
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_for_event_types(hub: ServiceInfo, timeout: float = 60) -> None:
    """Each service registers its event types when it connects to NATS; the hub picks them
    up from the KV bucket. Until then subscribing to them is (rightly) a 422."""
    wanted = {"order.paid", "run.completed", "subscription.disabled"}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        response = httpx.get(
            f"{hub.url}/webhooks/event-types",
            headers={"Authorization": f"Bearer {hub.admin_key}"},
            timeout=5,
        )
        if wanted <= {t["name"] for t in response.json()["data"]}:
            return
        time.sleep(0.5)
    raise RuntimeError("the services' event types did not reach webhook-hub")


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    # A connection idle for a second is not reused: the services' uvicorn closes one idle for
    # 5 s, and a request sent on it as it closes fails with ReadError (seen under load, after
    # a subscription's wait for its test event).
    limits = httpx.Limits(keepalive_expiry=1.0)
    async with httpx.AsyncClient(timeout=30, limits=limits) as client:
        yield client


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    each = Receiver()
    await each.start()
    yield each
    await each.stop()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    from figures import FIGURES

    if FIGURES:
        terminalreporter.section("end-to-end figures")
        for flow, values in FIGURES.items():
            terminalreporter.write_line(
                f"{flow}: " + ", ".join(f"{k}={v}" for k, v in values.items())
            )
