"""The stop signal on NATS (`scraper.runs.stop`): the API publishes it after the stop is
committed; every worker listens, and the one crawling that run stops it at once. The stop is
also on the run row, so a worker that missed the signal stops at its next heartbeat."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import structlog
from servicekit.runtime import ServiceRuntime

logger = structlog.get_logger(__name__)
STOP_SUBJECT = "scraper.runs.stop"


async def signal_stop(runtime: ServiceRuntime, run_id: int) -> None:
    try:
        await runtime.nats.client.publish(STOP_SUBJECT, json.dumps({"run_id": run_id}).encode())
    except Exception as exc:
        logger.info("stop signal not sent; the heartbeat will carry it", error=repr(exc))


async def listen_for_stops(
    runtime: ServiceRuntime, stops: dict[int, tuple[asyncio.Event, asyncio.Event]]
) -> Any:
    async def on_stop(msg: Any) -> None:
        try:
            run_id = int(json.loads(msg.data)["run_id"])
        except (ValueError, KeyError, TypeError):
            return
        events = stops.get(run_id)
        if events is not None:
            stop, requested = events
            requested.set()
            stop.set()

    return await runtime.nats.client.subscribe(STOP_SUBJECT, cb=on_stop)
