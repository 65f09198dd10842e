"""Health endpoints of a worker process, for orchestrators: `/healthz` (the event loop
answers), `/readyz` (database and NATS reachable, and every loop making progress: one that
completed no iteration for `worker_loop_stall_seconds` is named in the body), `/metrics`
(Prometheus). Off unless `worker_probe_port` is set; Kubernetes probes use them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

from servicekit.loops import readiness
from servicekit.runtime import ServiceRuntime
from servicekit.settings import ServiceSettings


def probe_app(runtime: ServiceRuntime) -> web.Application:
    async def healthz(_: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def readyz(_: web.Request) -> web.Response:
        status, body = readiness(
            await runtime.database_reachable(),
            runtime.nats.is_connected,
            runtime.progress.stalled(runtime.settings.worker_loop_stall_seconds),
        )
        return web.json_response(body, status=status)

    async def metrics(_: web.Request) -> web.Response:
        return web.Response(
            body=generate_latest(REGISTRY), headers={"Content-Type": CONTENT_TYPE_LATEST}
        )

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics)
    return app


@asynccontextmanager
async def worker_probes(settings: ServiceSettings, runtime: ServiceRuntime) -> AsyncIterator[None]:
    if settings.worker_probe_port is None:
        yield
        return
    runner = web.AppRunner(probe_app(runtime), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, settings.host, settings.worker_probe_port).start()
    try:
        yield
    finally:
        await runner.cleanup()
