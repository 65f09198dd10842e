"""The run queue on JetStream: a work-queue stream any number of workers pull from.

PostgreSQL stays the truth about a run. A message only says "run N is waiting", and a worker
claims run N only if it is still pending, so a duplicate message is harmless. A sweeper
enqueues again the runs that waited too long (a message lost while NATS was down, say).
"""

from __future__ import annotations

import json
from typing import Any

import structlog
from nats.js import JetStreamContext
from nats.js.api import ConsumerConfig, RetentionPolicy, StorageType, StreamConfig
from nats.js.errors import NotFoundError
from servicekit.runtime import ServiceRuntime

logger = structlog.get_logger(__name__)
RUNS_STREAM = "SCRAPER_RUNS"
RUNS_SUBJECT = "scraper.runs.queue"
WORKERS_CONSUMER = "scraper-workers"


async def ensure_runs_stream(js: JetStreamContext) -> None:
    config = StreamConfig(
        name=RUNS_STREAM,
        subjects=[RUNS_SUBJECT],
        retention=RetentionPolicy.WORK_QUEUE,
        storage=StorageType.FILE,
        duplicate_window=60,
    )
    try:
        await js.stream_info(RUNS_STREAM)
    except NotFoundError:
        await js.add_stream(config)


async def enqueue_run(runtime: ServiceRuntime, run_id: int, attempt: int = 0) -> None:
    try:
        js = runtime.nats.js
        await ensure_runs_stream(js)
        await js.publish(
            RUNS_SUBJECT,
            json.dumps({"run_id": run_id}).encode(),
            headers={"Nats-Msg-Id": f"run-{run_id}-{attempt}"},
        )
    except Exception as exc:
        # The sweeper enqueues it again; the run is safe in the database meanwhile.
        logger.info("run not enqueued yet", run_id=run_id, error=repr(exc))


async def pull_subscription(js: JetStreamContext) -> Any:
    await ensure_runs_stream(js)
    return await js.pull_subscribe(
        RUNS_SUBJECT,
        durable=WORKERS_CONSUMER,
        stream=RUNS_STREAM,
        config=ConsumerConfig(ack_wait=30, max_ack_pending=1000),
    )


def run_id_of(data: bytes) -> int | None:
    """The run a queue message names, or None when it names none: total, any bytes in (a
    number no int holds, `1e400`, or JSON nested past the parser's depth once escaped the
    queue's loop)."""
    try:
        message = json.loads(data)
    except (ValueError, RecursionError):
        return None
    run_id = message.get("run_id") if isinstance(message, dict) else None
    # Exactly an int: `True` is one to Python, and a float such as 3.5 names no run.
    return run_id if type(run_id) is int and run_id > 0 else None
