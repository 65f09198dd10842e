"""The engine's recording of outcomes when the database refuses one of them: the rest are
recorded, that one is left out with an error line, and the engine goes on. Without this a
single value the database cannot hold stopped every outcome of the worker for good."""

from __future__ import annotations

import asyncio
import dataclasses
import time

from servicekit.db.engine import create_session_factory
from servicekit.testing import HttpReceiver
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlmodel.ext.asyncio.session import AsyncSession
from structlog.testing import capture_logs
from webhook_hub.delivery_engine.engine import DeliveryEngine
from webhook_hub.delivery_engine.sender import WebhookSender
from webhook_hub.models import Subscription
from webhook_hub.settings import Settings

from tests.recording_factories import first_attempt, rows_of


async def test_an_outcome_the_database_refuses_is_left_out_and_the_others_are_recorded(
    db_engine: AsyncEngine,
    service_settings: Settings,
    http_receiver: HttpReceiver,
    committed_subscription: Subscription,
) -> None:
    subscription = committed_subscription
    sender = WebhookSender(user_agent="tests", response_body_limit=4096, guard=None)
    engine = DeliveryEngine(create_session_factory(db_engine), service_settings, sender)
    jobs = [
        dataclasses.replace(first_attempt(subscription).job, endpoint_url=http_receiver.url)
        for _ in range(3)
    ]
    # A value no column of the row can hold (dispatch never lets such a one through).
    jobs[1].traceparent = "00-" + "f" * 60
    try:
        for job in jobs:
            engine.offer(job, time.monotonic())
        await http_receiver.wait_for(3)
        await asyncio.sleep(0.2)  # the answers are read
        with capture_logs() as logs:
            assert await engine.flush() == 2
        assert await engine.flush() == 0  # nothing kept back to fail again
    finally:
        await sender.close()
    async with AsyncSession(db_engine) as session:
        assert [status for status, *_ in await rows_of(session, subscription.id)] == [
            "succeeded",
            "succeeded",
        ]
    [refused] = [line for line in logs if line["log_level"] == "error"]
    assert refused["event"] == "delivery outcome refused by the database; left out"
    assert refused["delivery_id"] == str(jobs[1].delivery_id)
