"""The long-running worker process: the outbox relay, its backlog gauge and its retention,
plus whatever loops a service adds."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Sequence

import structlog

from servicekit.events.registry import EventTypeRegistry
from servicekit.events.relay import LOOP as RELAY_LOOP
from servicekit.events.relay import OutboxRelay
from servicekit.outbox_backlog import outbox_backlog_loop
from servicekit.retention import outbox_retention_loop
from servicekit.runtime import ServiceRuntime
from servicekit.runtime import WorkerLoop as WorkerLoop  # where services have always taken it
from servicekit.settings import ServiceSettings
from servicekit.tracing.setup import configure_tracing, shutdown_tracing
from servicekit.web.logging import configure_logging
from servicekit.worker_probes import worker_probes

logger = structlog.get_logger(__name__)


def outbox_relay_loop(source: str) -> WorkerLoop:
    async def run(runtime: ServiceRuntime, stop: asyncio.Event) -> None:
        settings = runtime.settings
        relay = OutboxRelay(
            runtime.engine,
            runtime.nats.js,
            source=source,
            database_url=settings.database_url,
            batch_size=settings.outbox_batch_size,
            poll_seconds=settings.outbox_poll_seconds,
        )
        runtime.progress.beat(RELAY_LOOP, settings.outbox_poll_seconds)
        await relay.run(stop, lambda wait: runtime.progress.beat(RELAY_LOOP, wait))

    return run


async def run_worker(
    settings: ServiceSettings,
    *,
    source: str,
    registry: EventTypeRegistry | None,
    loops: Sequence[WorkerLoop] = (),
    stop: asyncio.Event | None = None,
) -> None:
    """Run the relay and the service's loops until SIGINT/SIGTERM (or `stop`) ."""
    configure_logging(settings.log_level, json=settings.log_json)
    configure_tracing(source)
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    runtime = ServiceRuntime.open(settings, registry)
    try:
        async with worker_probes(settings, runtime):
            await _run_loops(runtime, source, loops, stop)
    finally:
        await runtime.close()
        logger.info("worker stopped", service=source)
        shutdown_tracing()


async def _run_loops(
    runtime: ServiceRuntime, source: str, loops: Sequence[WorkerLoop], stop: asyncio.Event
) -> None:
    while not stop.is_set():
        try:
            await runtime.nats.wait_ready(timeout=1.0)
            break
        except TimeoutError:
            continue
    if stop.is_set():
        return
    logger.info("worker started", service=source)
    tasks = [
        asyncio.create_task(each(runtime, stop), name=each.__qualname__)
        for each in (
            outbox_relay_loop(source),
            outbox_backlog_loop,
            outbox_retention_loop(runtime.settings),
            *loops,
        )
    ]
    stopper = asyncio.create_task(stop.wait())
    done, _ = await asyncio.wait({stopper, *tasks}, return_when=asyncio.FIRST_COMPLETED)
    stop.set()
    for task in done:
        if task is not stopper and task.exception() is not None:
            logger.error("worker loop crashed", error=repr(task.exception()))
    _, pending = await asyncio.wait(tasks, timeout=10)
    for task in pending:
        logger.warning("worker loop did not stop in time; cancelling", loop=task.get_name())
        task.cancel()
