"""The schedule and timeout a real worker uses for a failing receiver: the subscription's, else
its owner's default, else the service's settings (issue 32, item 1).

The worker's own schedule is [3 s, 2 h] with no jitter, so each source is told apart by the
wait it sets after the second failed attempt (read from the delivery's row: exact, as there
is no jitter), and the first retry comes no sooner than the first wait of the schedule used.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from servicekit.testing.receiver import PlannedResponse
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine
from webhook_hub.settings import Settings

from tests.factories import (
    Consumer,
    Delivering,
    make_consumer,
    running_worker,
    subscribe,
)

SERVICE_SCHEDULE = [3.0, 7200.0]
DEFAULTS = "/webhooks/consumers/me/defaults"


@pytest.fixture
async def scheduled_worker(fast_settings: Settings) -> AsyncIterator[Settings]:
    """The whole worker with the service's schedule `SERVICE_SCHEDULE`."""
    settings = fast_settings.model_copy(update={"retry_schedule_seconds": SERVICE_SCHEDULE})
    async with running_worker(settings) as running:
        yield running


async def delivery_after(
    engine: AsyncEngine, subscription_id: str, attempts: int, timeout: float = 20.0
) -> Any:
    """The subscription's one event delivery once it has made `attempts` attempts."""
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        async with engine.connect() as conn:
            row = (
                await conn.execute(
                    text(
                        "SELECT * FROM deliveries WHERE subscription_id = :id"
                        " AND event_type <> 'webhook.test'"
                    ),
                    {"id": subscription_id},
                )
            ).first()
        if row is not None and row.attempts >= attempts:
            return row
        await asyncio.sleep(0.1)
    raise AssertionError(f"no delivery with {attempts} attempts within {timeout} s")


async def retried_at(engine: AsyncEngine, delivery_id: Any) -> list[datetime]:
    async with engine.connect() as conn:
        return list(
            (
                await conn.execute(
                    text(
                        "SELECT attempted_at FROM delivery_attempts WHERE delivery_id = :id"
                        " ORDER BY attempted_at"
                    ),
                    {"id": delivery_id},
                )
            ).scalars()
        )


async def failing_subscription(delivering: Delivering, consumer: Consumer, **settings: Any) -> str:
    receiver = delivering.receiver
    created = await subscribe(
        delivering.client, consumer.headers, receiver.url, ["order.paid"], **settings
    )
    await receiver.wait_for(2)  # the probe and the test event, answered 200
    receiver.default = PlannedResponse(500, b"down")
    return str(created["id"])


async def test_the_subscriptions_schedule_is_used_when_it_sets_one(
    scheduled_worker: Settings, delivering: Delivering
) -> None:
    consumer = await make_consumer(delivering.engine, "write")
    # The owner's default is passed over too.
    await delivering.client.put(
        DEFAULTS, json={"retry_schedule": ["2s", "3h"]}, headers=consumer.headers
    )
    sub_id = await failing_subscription(delivering, consumer, retry_schedule=["1s", "1h"])
    await delivering.publish("order.paid", {"id": 1})
    row = await delivery_after(delivering.engine, sub_id, 2)
    [second] = await retried_at(delivering.engine, row.id)
    assert second - row.created_at >= timedelta(seconds=1)
    assert row.next_attempt_at - row.last_attempt_at == timedelta(hours=1)
    assert row.status == "pending"


async def test_the_owners_default_is_used_when_the_subscription_sets_none(
    scheduled_worker: Settings, delivering: Delivering
) -> None:
    consumer = await make_consumer(delivering.engine, "write")
    await delivering.client.put(
        DEFAULTS, json={"retry_schedule": ["1s", "3h"]}, headers=consumer.headers
    )
    sub_id = await failing_subscription(delivering, consumer)
    await delivering.publish("order.paid", {"id": 2})
    row = await delivery_after(delivering.engine, sub_id, 2)
    [second] = await retried_at(delivering.engine, row.id)
    assert second - row.created_at >= timedelta(seconds=1)
    assert row.next_attempt_at - row.last_attempt_at == timedelta(hours=3)


async def test_the_services_schedule_is_used_when_neither_sets_one(
    scheduled_worker: Settings, delivering: Delivering
) -> None:
    consumer = await make_consumer(delivering.engine, "write")
    sub_id = await failing_subscription(delivering, consumer)
    await delivering.publish("order.paid", {"id": 3})
    row = await delivery_after(delivering.engine, sub_id, 2)
    [second] = await retried_at(delivering.engine, row.id)
    assert second - row.created_at >= timedelta(seconds=SERVICE_SCHEDULE[0])
    assert row.next_attempt_at - row.last_attempt_at == timedelta(seconds=SERVICE_SCHEDULE[1])


async def test_an_owners_new_default_applies_from_the_next_attempt(
    scheduled_worker: Settings, delivering: Delivering
) -> None:
    """The first retry was timed by the service's schedule (3 s); the default set meanwhile
    times the wait after the second attempt."""
    consumer = await make_consumer(delivering.engine, "write")
    sub_id = await failing_subscription(delivering, consumer)
    await delivering.publish("order.paid", {"id": 4})
    first = await delivery_after(delivering.engine, sub_id, 1)
    assert first.next_attempt_at - first.last_attempt_at == timedelta(seconds=SERVICE_SCHEDULE[0])
    await delivering.client.put(
        DEFAULTS, json={"retry_schedule": ["1s", "5h"]}, headers=consumer.headers
    )
    row = await delivery_after(delivering.engine, sub_id, 2)
    assert row.next_attempt_at - row.last_attempt_at == timedelta(hours=5)


async def test_a_schedule_of_one_wait_gives_up_after_two_attempts(
    scheduled_worker: Settings, delivering: Delivering
) -> None:
    consumer = await make_consumer(delivering.engine, "write")
    sub_id = await failing_subscription(delivering, consumer, retry_schedule=["1s"])
    await delivering.publish("order.paid", {"id": 5})
    row = await delivery_after(delivering.engine, sub_id, 2)
    assert (row.status, row.next_attempt_at) == ("failed", None)


async def test_the_owners_default_timeout_cuts_off_a_slow_answer_on_every_attempt(
    scheduled_worker: Settings, delivering: Delivering
) -> None:
    consumer = await make_consumer(delivering.engine, "write")
    await delivering.client.put(DEFAULTS, json={"timeout_seconds": 1}, headers=consumer.headers)
    sub_id = await failing_subscription(delivering, consumer, retry_schedule=["1s"])
    delivering.receiver.default = PlannedResponse(200, b"late", delay=3.0)
    await delivering.publish("order.paid", {"id": 6})
    row = await delivery_after(delivering.engine, sub_id, 2)
    # The first attempt (from dispatch's read) and the retry (from the claim) alike.
    assert row.first_error == "timed out after 1 s"
    assert row.last_error == "timed out after 1 s"
