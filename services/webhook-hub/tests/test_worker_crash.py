"""A worker killed with SIGKILL in the middle of a batch loses nothing once restarted."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
from collections import defaultdict

import httpx
from nats.js import JetStreamContext
from servicekit.testing import HttpReceiver
from servicekit.testing.receiver import PlannedResponse
from sqlalchemy.ext.asyncio import AsyncEngine
from standardwebhooks import Webhook
from webhook_hub.settings import Settings

from tests.factories import (
    create_subscription,
    make_consumer,
    publish_event,
    stop_processes,
    worker_process,
)

EVENTS = 1000


def start_worker(settings: Settings) -> subprocess.Popen[bytes]:
    return worker_process(
        settings,
        {
            "WEBHOOK_HUB_DELIVERY_LEASE_EXTRA_SECONDS": "2",
            "WEBHOOK_HUB_DISPATCH_ACK_WAIT_SECONDS": "3",
            "WEBHOOK_HUB_RETRY_SCHEDULE_SECONDS": "[0.5, 0.5, 0.5, 0.5, 0.5]",
        },
    )


async def test_a_worker_killed_mid_batch_delivers_every_event_after_restart(
    service_settings: Settings,
    client: httpx.AsyncClient,
    db_engine: AsyncEngine,
    http_receiver: HttpReceiver,
    js: JetStreamContext,
) -> None:
    consumer = await make_consumer(db_engine, "write")
    created = (
        await create_subscription(
            client, consumer.headers, http_receiver.url, ["order.created"], timeout_seconds=1
        )
    ).json()
    http_receiver.default = PlannedResponse(200, delay=0.02)
    worker = start_worker(service_settings)
    try:
        for n in range(EVENTS):
            await publish_event(js, "order.created", {"n": n})

        def delivered() -> dict[int, set[str]]:
            seen: dict[int, set[str]] = defaultdict(set)
            for request in http_receiver.requests:
                if request.method != "POST" or b'"order.created"' not in request.body:
                    continue
                body = Webhook(created["secret"]).verify(request.body, request.headers)
                seen[body["data"]["n"]].add(request.headers["webhook-id"])
            return seen

        for _ in range(600):
            if len(delivered()) >= 150:
                break
            await asyncio.sleep(0.05)
        assert 0 < len(delivered()) < EVENTS, "the kill must land in the middle of the batch"
        worker.send_signal(signal.SIGKILL)
        worker.wait(10)
        at_kill = len(delivered())

        worker = start_worker(service_settings)
        for _ in range(1200):
            if len(delivered()) == EVENTS:
                break
            await asyncio.sleep(0.05)
        seen = delivered()
        assert sorted(seen) == list(range(EVENTS))
        # A duplicate, if any, is the same delivery again: one webhook-id per event.
        assert all(len(ids) == 1 for ids in seen.values())
        total_posts = sum(
            1 for r in http_receiver.requests if r.method == "POST" and b"order.created" in r.body
        )
        print(
            json.dumps(
                {
                    "events": EVENTS,
                    "delivered_before_kill": at_kill,
                    "posts": total_posts,
                    "duplicates": total_posts - EVENTS,
                }
            )
        )
    finally:
        stop_processes(worker)
