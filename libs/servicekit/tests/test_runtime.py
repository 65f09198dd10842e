"""The NATS connection of a process: who owns the EVENTS stream."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from nats.js import JetStreamContext
from servicekit.embedded.network import free_port, wait_for_port
from servicekit.runtime import NatsConnection, ServiceRuntime
from servicekit.settings import ServiceSettings
from servicekit.worker import run_worker


async def test_a_service_that_does_not_own_the_stream_waits_for_it(
    kit_settings: ServiceSettings,
) -> None:
    settings = kit_settings.model_copy(
        update={"manage_events_stream": False, "events_stream": "CREATED_BY_A_JOB"}
    )
    connection = NatsConnection(settings, None)
    connection.start()
    try:
        with pytest.raises(TimeoutError):
            await connection.wait_ready(timeout=1.5)
        assert not connection.is_connected
    finally:
        await connection.close()


async def test_a_service_that_does_not_own_the_stream_starts_once_it_exists(
    kit_settings: ServiceSettings, js: JetStreamContext
) -> None:
    settings = kit_settings.model_copy(update={"manage_events_stream": False})
    connection = NatsConnection(settings, None)
    connection.start()
    try:
        await asyncio.wait_for(connection.wait_ready(), 10)
        assert connection.is_connected
    finally:
        await connection.close()


async def test_a_worker_answers_health_readiness_and_metrics_when_asked_to(
    kit_settings: ServiceSettings, js: JetStreamContext
) -> None:
    port = free_port()
    settings = kit_settings.model_copy(update={"worker_probe_port": port})
    stop = asyncio.Event()
    worker = asyncio.create_task(
        run_worker(settings, source="probe-test", registry=None, stop=stop)
    )
    try:
        await asyncio.to_thread(wait_for_port, "127.0.0.1", port, 20)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
            for _ in range(100):
                ready = await http.get("/readyz")
                if ready.status_code == 200:
                    break
                await asyncio.sleep(0.1)
            health = await http.get("/healthz")
            metrics = await http.get("/metrics")
        assert ready.json() == {
            "status": "ready",
            "checks": {"database": True, "nats": True, "loops": True},
        }
        assert health.json() == {"status": "ok"}
        assert metrics.status_code == 200
        assert "python_info" in metrics.text
    finally:
        stop.set()
        await asyncio.wait_for(worker, 30)


async def test_a_worker_loop_that_stops_making_progress_makes_readyz_503_naming_it(
    kit_settings: ServiceSettings, js: JetStreamContext
) -> None:
    port = free_port()
    settings = kit_settings.model_copy(
        update={"worker_probe_port": port, "worker_loop_stall_seconds": 0.2}
    )

    async def stuck(runtime: ServiceRuntime, stop: asyncio.Event) -> None:
        runtime.progress.beat("stuck-loop")
        await stop.wait()  # never completes an iteration again

    stop = asyncio.Event()
    worker = asyncio.create_task(
        run_worker(settings, source="probe-test", registry=None, loops=[stuck], stop=stop)
    )
    try:
        await asyncio.to_thread(wait_for_port, "127.0.0.1", port, 20)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
            for _ in range(100):
                ready = await http.get("/readyz")
                if "stuck-loop" in ready.json().get("stalled_loops", []):
                    break
                await asyncio.sleep(0.1)
        assert ready.status_code == 503
        # (The relay and the backlog gauge may be late too on a busy machine: 0.2 s is tight.)
        assert "stuck-loop" in ready.json()["stalled_loops"]
        assert ready.json()["checks"]["loops"] is False
    finally:
        stop.set()
        await asyncio.wait_for(worker, 30)
