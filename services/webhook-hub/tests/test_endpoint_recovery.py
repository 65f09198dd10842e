"""A subscription whose endpoint stops answering: after a few failed attempts in a row its
circuit breaker holds its deliveries (stored, not attempted) and lets one probe through at a
time; when a probe succeeds, everything it held goes out at once, not at the retry schedule's
next step. Real PostgreSQL, real sockets: an endpoint that refuses connections (nothing
listens on its port) and then comes back on the same port."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
import uuid
from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from servicekit.db.engine import create_engine
from servicekit.embedded.network import free_port
from servicekit.testing import HttpReceiver
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlmodel.ext.asyncio.session import AsyncSession
from webhook_hub.delivery_engine.engine import DeliveryEngine
from webhook_hub.delivery_engine.jobs import DeliveryJob
from webhook_hub.models import Subscription
from webhook_hub.settings import Settings

from tests.recording_factories import first_attempt, make_subscription, rows_of
from tests.scripted_server import Reply, ScriptedServer, answer, start_scripted
from tests.test_engine_recording import engine_of, plain_sender

FAILURES = 3


class ReturningReceiver(HttpReceiver):
    """An HTTP receiver whose port refuses connections until `start`."""

    def __init__(self) -> None:
        super().__init__()
        self.port = free_port()

    async def start(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, self.host, self.port).start()


def breaker_settings(settings: Settings, *, probe: float, per_subscription: int = 64) -> Settings:
    """A retry schedule far longer than the test (a delivery retried by it would not arrive
    in time), a breaker that opens at the third failure in a row and probes every `probe`."""
    return settings.model_copy(
        update={
            "retry_schedule_seconds": [300.0],
            "retry_jitter": 0.0,
            "delivery_poll_seconds": 0.1,
            "circuit_breaker_failures": FAILURES,
            "circuit_probe_seconds": probe,
            "circuit_probe_max_seconds": probe,
            "per_subscription_concurrency": per_subscription,
        }
    )


def jobs_to(subscription: Subscription, url: str, count: int) -> list[DeliveryJob]:
    return [
        dataclasses.replace(
            first_attempt(subscription).job, endpoint_url=url, owner=subscription.owner
        )
        for _ in range(count)
    ]


async def scalar(db_engine: AsyncEngine, sql: str, subscription_id: uuid.UUID) -> int:
    async with AsyncSession(db_engine) as session:
        connection = await session.connection()
        value = await connection.scalar(text(sql), {"id": subscription_id})
    return int(value or 0)


async def stored(db_engine: AsyncEngine, subscription_id: uuid.UUID, count: int) -> None:
    """Until `count` deliveries of the subscription are stored (up to 10 s)."""
    for _ in range(100):
        if (
            await scalar(
                db_engine,
                "SELECT count(*) FROM deliveries WHERE subscription_id = :id",
                subscription_id,
            )
            >= count
        ):
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"{count} deliveries not stored")


@contextlib.asynccontextmanager
async def running(engine: DeliveryEngine) -> AsyncIterator[None]:
    stop = asyncio.Event()
    task = asyncio.create_task(engine.run(stop))
    try:
        yield
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)


@pytest.fixture
async def own_engine(own_database: Settings) -> AsyncIterator[AsyncEngine]:
    # A database of its own: the claim loop takes whatever is due, and other tests leave some.
    db_engine = create_engine(own_database)
    try:
        yield db_engine
    finally:
        await db_engine.dispose()


async def breaker_opened_by_500s(
    db_engine: AsyncEngine, service_settings: Settings, subscription: Subscription
) -> tuple[ScriptedServer, list[DeliveryJob]]:
    """Ten deliveries offered, one attempt at a time, to an endpoint answering 500: the third
    failure opens the breaker, whose first probe is far beyond the test; their outcomes
    flushed. The endpoint (its requests) and the jobs."""
    server, listener = await start_scripted(lambda _: Reply(answer(500)))
    settings = breaker_settings(service_settings, probe=600.0, per_subscription=1)
    jobs = jobs_to(subscription, f"http://127.0.0.1:{server.port}/hook", 10)
    sender = plain_sender()
    engine = engine_of(db_engine, settings, sender)
    try:
        now = time.monotonic()
        for job in jobs:
            engine.offer(job, now)
        while len(server.requests) < FAILURES:
            await asyncio.wait_for(server.received.wait(), 10)
            server.received.clear()
        await asyncio.sleep(0.3)  # the third answer is read
        await engine.flush()
    finally:
        await sender.close()
        listener.close()
    return server, jobs


async def new_subscription(db_engine: AsyncEngine, url: str) -> Subscription:
    async with AsyncSession(db_engine, expire_on_commit=False) as session, session.begin():
        subscription = await make_subscription(session)
        subscription.endpoint_url = url
    return subscription


async def test_a_receiver_that_comes_back_gets_its_backlog_at_the_next_probe_not_the_next_retry(
    own_database: Settings, own_engine: AsyncEngine
) -> None:
    settings = breaker_settings(own_database, probe=0.3)
    receiver = ReturningReceiver()
    subscription = await new_subscription(own_engine, receiver.url)
    jobs = jobs_to(subscription, receiver.url, 20)
    sender = plain_sender()
    engine = engine_of(own_engine, settings, sender)
    try:
        async with running(engine):
            now = time.monotonic()
            for job in jobs:
                engine.offer(job, now)
            await stored(own_engine, subscription.id, len(jobs))
            await receiver.start()
            # The retry schedule's next step is 300 s away: only the probe brings them.
            received = await receiver.wait_for(len(jobs), timeout=30)
            await asyncio.sleep(0.5)  # their outcomes are recorded
    finally:
        await receiver.stop()
        await sender.close()
    assert {r.headers["webhook-id"] for r in received} == {job.message_id for job in jobs}
    async with AsyncSession(own_engine) as session:
        rows = await rows_of(session, subscription.id)
    # Every attempt made is in the log, and each delivery's count says so.
    assert all(status == "succeeded" for status, *_ in rows)
    assert all(attempts == logged for _, attempts, _, logged in rows)


async def test_held_deliveries_are_not_attempted_while_the_breaker_is_open(
    db_engine: AsyncEngine, service_settings: Settings, committed_subscription: Subscription
) -> None:
    server, jobs = await breaker_opened_by_500s(db_engine, service_settings, committed_subscription)
    assert len(server.requests) == FAILURES
    async with AsyncSession(db_engine) as session:
        rows = await rows_of(session, committed_subscription.id)
    assert (
        sorted((status, attempts) for status, attempts, _, _ in rows)
        == [("pending", 0)] * (len(jobs) - FAILURES) + [("pending", 1)] * FAILURES
    )


async def test_held_deliveries_do_not_count_as_failures(
    db_engine: AsyncEngine, service_settings: Settings, committed_subscription: Subscription
) -> None:
    await breaker_opened_by_500s(db_engine, service_settings, committed_subscription)
    failures = await scalar(
        db_engine,
        "SELECT failure_count FROM subscriptions WHERE id = :id",
        committed_subscription.id,
    )
    assert failures == FAILURES


async def test_other_subscriptions_are_sent_while_one_is_held(
    db_engine: AsyncEngine,
    service_settings: Settings,
    committed_subscription: Subscription,
    other_owners_subscription: Subscription,
    http_receiver: HttpReceiver,
) -> None:
    refusing = f"http://127.0.0.1:{free_port()}/hook"
    settings = breaker_settings(service_settings, probe=600.0, per_subscription=1)
    held = jobs_to(committed_subscription, refusing, 10)
    others = jobs_to(other_owners_subscription, http_receiver.url, 10)
    sender = plain_sender()
    engine = engine_of(db_engine, settings, sender)
    try:
        now = time.monotonic()
        for job in held:
            engine.offer(job, now)
        for job in others:
            engine.offer(job, now)
        received = await http_receiver.wait_for(len(others))
        await asyncio.sleep(0.3)
        await engine.flush()
    finally:
        await sender.close()
    assert {r.headers["webhook-id"] for r in received} == {job.message_id for job in others}
    async with AsyncSession(db_engine) as session:
        rows = await rows_of(session, other_owners_subscription.id)
    assert [status for status, *_ in rows] == ["succeeded"] * len(others)


async def test_failed_probes_count_towards_the_auto_disable_threshold(
    own_database: Settings, own_engine: AsyncEngine
) -> None:
    # The spec's rule holds with the breaker: failed attempts in a row, probes included,
    # disable the subscription at the threshold (10 here); held deliveries add nothing.
    settings = breaker_settings(own_database, probe=0.05, per_subscription=1).model_copy(
        update={"failure_threshold": 10}
    )
    refusing = f"http://127.0.0.1:{free_port()}/hook"
    subscription = await new_subscription(own_engine, refusing)
    sender = plain_sender()
    engine = engine_of(own_engine, settings, sender)
    active_sql = "SELECT CAST(is_active AS int) FROM subscriptions WHERE id = :id"
    try:
        async with running(engine):
            now = time.monotonic()
            for job in jobs_to(subscription, refusing, 30):
                engine.offer(job, now)
            for _ in range(200):
                if not await scalar(own_engine, active_sql, subscription.id):
                    break
                await asyncio.sleep(0.1)
    finally:
        await sender.close()
    failures = await scalar(
        own_engine, "SELECT failure_count FROM subscriptions WHERE id = :id", subscription.id
    )
    attempted = await scalar(
        own_engine,
        "SELECT sum(attempts) FROM deliveries WHERE subscription_id = :id",
        subscription.id,
    )
    assert await scalar(own_engine, active_sql, subscription.id) == 0
    # A probe in flight as the tenth failure was recorded may add one more.
    assert failures == attempted
    assert 10 <= failures < 30
