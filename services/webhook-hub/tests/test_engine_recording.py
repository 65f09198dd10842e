"""The engine's recording of outcomes when one of them cannot be recorded: the rest are
recorded, that one is recorded as a failed attempt without its answer (or, when even that is
refused, left out) with an error line, and the engine goes on. Without this a single value
the database cannot hold, or one answer the decisions could not read, stopped every outcome
of the worker, every owner's, for good."""

from __future__ import annotations

import asyncio
import dataclasses
import time
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from servicekit.db.engine import create_engine, create_session_factory
from servicekit.testing import HttpReceiver
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlmodel.ext.asyncio.session import AsyncSession
from structlog.testing import capture_logs
from webhook_hub.delivery_engine.engine import DeliveryEngine
from webhook_hub.delivery_engine.jobs import AttemptResult, DeliveryJob, StoredDelivery
from webhook_hub.delivery_engine.sender import WebhookSender
from webhook_hub.delivery_engine.store import DeliveryStore, DeliveryWrites
from webhook_hub.models import Subscription
from webhook_hub.settings import Settings

from tests.recording_factories import first_attempt, make_subscription, rows_of
from tests.scripted_server import Reply, always, answer, start_scripted


def engine_of(db_engine: AsyncEngine, settings: Settings, sender: WebhookSender) -> DeliveryEngine:
    return DeliveryEngine(
        DeliveryStore(create_session_factory(db_engine), settings), settings, sender
    )


def plain_sender() -> WebhookSender:
    return WebhookSender(user_agent="tests", response_body_limit=4096, guard=None)


def first_attempts_to(subscription: Subscription, url: str, count: int = 3) -> list[DeliveryJob]:
    return [
        dataclasses.replace(first_attempt(subscription).job, endpoint_url=url) for _ in range(count)
    ]


async def attempted(
    engine: DeliveryEngine, jobs: list[DeliveryJob], receiver: HttpReceiver
) -> None:
    """Each job offered to the engine, and their answers read (not yet recorded)."""
    for job in jobs:
        engine.offer(job, time.monotonic())
    await receiver.wait_for(len(jobs))
    await asyncio.sleep(0.2)  # the answers are read


async def states_of(
    db_engine: AsyncEngine, subscription_id: uuid.UUID
) -> dict[uuid.UUID, tuple[str, int, str | None]]:
    """Each delivery of the subscription: (status, attempts, last_error)."""
    async with AsyncSession(db_engine) as session:
        connection = await session.connection()
        rows = await connection.execute(
            text(
                "SELECT id, status, attempts, last_error FROM deliveries WHERE subscription_id = :s"
            ),
            {"s": subscription_id},
        )
        return {row.id: (row.status, row.attempts, row.last_error) for row in rows}


async def test_an_outcome_the_database_refuses_is_left_out_and_the_others_are_recorded(
    db_engine: AsyncEngine,
    service_settings: Settings,
    http_receiver: HttpReceiver,
    committed_subscription: Subscription,
) -> None:
    subscription = committed_subscription
    sender = plain_sender()
    engine = engine_of(db_engine, service_settings, sender)
    jobs = first_attempts_to(subscription, http_receiver.url)
    # A value no column of the row can hold (dispatch never lets such a one through).
    jobs[1].traceparent = "00-" + "f" * 60
    try:
        await attempted(engine, jobs, http_receiver)
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
    assert refused["event"] == "delivery outcome could not be recorded; left out"
    assert refused["delivery_id"] == str(jobs[1].delivery_id)


@pytest.mark.parametrize(
    "hostile_answer",
    [
        answer(503, extra=b"retry-after: Wed, 21 Oct 2015 07:28:00 -0000\r\n"),
        answer(429, extra=b"retry-after: \xb2\r\n"),
    ],
    ids=["503-date-minus-zero-zone", "429-superscript-two"],
)
async def test_a_hostile_retry_after_does_not_stop_another_owners_outcomes(
    db_engine: AsyncEngine,
    service_settings: Settings,
    http_receiver: HttpReceiver,
    committed_subscription: Subscription,
    other_owners_subscription: Subscription,
    hostile_answer: bytes,
) -> None:
    hostile, server = await start_scripted(always(Reply(hostile_answer)))
    sender = plain_sender()
    engine = engine_of(db_engine, service_settings, sender)
    [hostile_job] = first_attempts_to(
        committed_subscription, f"http://127.0.0.1:{hostile.port}/hook", 1
    )
    try:
        engine.offer(hostile_job, time.monotonic())
        await attempted(
            engine, first_attempts_to(other_owners_subscription, http_receiver.url), http_receiver
        )
        await asyncio.wait_for(hostile.received.wait(), 10)
        assert await engine.flush() == 4
    finally:
        await sender.close()
        server.close()
    async with AsyncSession(db_engine) as session:
        assert [row[:2] for row in await rows_of(session, other_owners_subscription.id)] == [
            ("succeeded", 1)
        ] * 3
        assert [row[:2] for row in await rows_of(session, committed_subscription.id)] == [
            ("pending", 1)
        ]


class DefectiveSender(WebhookSender):
    """A real sender with a defect for some deliveries: their result carries a value no parser
    makes (`spoiled`), or the attempt raises instead of answering (`raising`). It stands for
    any defect not found yet."""

    def __init__(
        self,
        *,
        spoiled: frozenset[uuid.UUID] = frozenset(),
        raising: frozenset[uuid.UUID] = frozenset(),
    ) -> None:
        super().__init__(user_agent="tests", response_body_limit=4096, guard=None)
        self.spoiled = spoiled
        self.raising = raising

    async def attempt(self, job: DeliveryJob) -> AttemptResult:
        result = await super().attempt(job)
        if job.delivery_id in self.raising:
            raise RuntimeError("a defect in the sender")
        if job.delivery_id in self.spoiled:
            # Made anew, as the sender makes a result: its outcome is worked out when it is.
            return dataclasses.replace(
                result,
                status_code=429,
                retry_after=7,  # type: ignore[arg-type]  # not text: reading it raises
            )
        return result


async def test_a_result_that_cannot_be_read_is_recorded_as_a_failed_attempt_and_the_others_go_on(
    db_engine: AsyncEngine,
    service_settings: Settings,
    http_receiver: HttpReceiver,
    committed_subscription: Subscription,
) -> None:
    jobs = first_attempts_to(committed_subscription, http_receiver.url)
    sender = DefectiveSender(spoiled=frozenset({jobs[1].delivery_id}))
    engine = engine_of(db_engine, service_settings, sender)
    try:
        await attempted(engine, jobs, http_receiver)
        with capture_logs() as logs:
            assert await engine.flush() == 3
        assert await engine.flush() == 0  # nothing kept back to fail again
    finally:
        await sender.close()
    by_id = await states_of(db_engine, committed_subscription.id)
    assert by_id[jobs[0].delivery_id][0] == by_id[jobs[2].delivery_id][0] == "succeeded"
    assert by_id[jobs[1].delivery_id] == (
        "pending",
        1,
        "the answer could not be recorded (AttributeError)",
    )
    [line] = [line for line in logs if line["log_level"] == "error"]
    assert line["event"] == "delivery answer could not be recorded; recorded as a failed attempt"
    assert line["delivery_id"] == str(jobs[1].delivery_id)
    assert line["error"].startswith("AttributeError")


async def test_an_attempt_that_raises_is_recorded_as_failed_and_its_slot_goes_on(
    db_engine: AsyncEngine,
    service_settings: Settings,
    http_receiver: HttpReceiver,
    committed_subscription: Subscription,
) -> None:
    jobs = first_attempts_to(committed_subscription, http_receiver.url)
    sender = DefectiveSender(raising=frozenset({jobs[0].delivery_id}))
    engine = engine_of(db_engine, service_settings, sender)
    try:
        await attempted(engine, jobs, http_receiver)
        assert await engine.flush() == 3
    finally:
        await sender.close()
    by_id = {
        id_: (status, error)
        for id_, (status, _, error) in (
            await states_of(db_engine, committed_subscription.id)
        ).items()
    }
    assert by_id == {
        jobs[0].delivery_id: ("pending", "RuntimeError in the attempt"),
        jobs[1].delivery_id: ("succeeded", None),
        jobs[2].delivery_id: ("succeeded", None),
    }


class UnreadableRowEngine(DeliveryEngine):
    """A real engine that cannot make a job of some claimed rows: it stands for any stored
    value the reading of a claim does not expect."""

    unreadable: set[uuid.UUID] = set()

    def _job(self, row: Any, now: datetime) -> StoredDelivery:
        if row.id in self.unreadable:
            raise ValueError("a stored value no job can hold")
        return super()._job(row, now)


async def test_a_claimed_row_that_cannot_be_read_is_failed_and_the_others_are_sent(
    own_database: Settings, http_receiver: HttpReceiver
) -> None:
    # A database of its own: a claim takes whatever is due, and other tests leave some.
    db_engine = create_engine(own_database)
    try:
        async with AsyncSession(db_engine) as session, session.begin():
            subscription = await make_subscription(session)
            subscription.endpoint_url = http_receiver.url
            deliveries = [
                await DeliveryWrites(session).add(
                    subscription.id,
                    event_id=uuid.uuid4(),
                    event_type="order.paid",
                    payload={"id": n},
                    event_time=datetime.now(UTC),
                )
                for n in range(3)
            ]
            ids = [delivery.id for delivery in deliveries]
        sender = plain_sender()
        engine = UnreadableRowEngine(
            DeliveryStore(create_session_factory(db_engine), own_database), own_database, sender
        )
        engine.unreadable = {ids[1]}
        try:
            with capture_logs() as logs:
                jobs = await engine.claim()
            assert sorted(job.delivery_id for job in jobs) == sorted([ids[0], ids[2]])
        finally:
            await sender.close()
        async with AsyncSession(db_engine) as session:
            connection = await session.connection()
            row = (
                await connection.execute(
                    text("SELECT status, lease_until, last_error FROM deliveries WHERE id = :id"),
                    {"id": ids[1]},
                )
            ).one()
    finally:
        await db_engine.dispose()
    assert tuple(row) == ("failed", None, "the stored delivery could not be read (ValueError)")
    [line] = [line for line in logs if line["log_level"] == "error"]
    assert line["delivery_id"] == str(ids[1])


async def test_the_engines_claim_and_recording_loops_report_each_iteration(
    db_engine: AsyncEngine, fast_settings: Settings
) -> None:
    sender = plain_sender()
    engine = engine_of(db_engine, fast_settings, sender)
    beats: list[str] = []
    stop = asyncio.Event()
    running = asyncio.create_task(engine.run(stop, lambda loop, _wait: beats.append(loop)))
    try:
        await asyncio.sleep(1.5)
    finally:
        stop.set()
        await asyncio.wait_for(running, 30)
        await sender.close()
    # Once as each starts, then once per completed iteration.
    assert beats.count("delivery-claims") >= 2
    assert beats.count("delivery-recording") >= 2
