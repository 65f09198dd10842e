"""A delivery set aside (it waited too long for its subscription's slot) is stored so its
event can be acknowledged, but stays with the worker that set it aside: stored leased to it,
claimed by no one, and sent from memory when a slot frees (its row written twice, not three
times and claimed). Real PostgreSQL, a real slow HTTP endpoint."""

from __future__ import annotations

import asyncio
import time

from servicekit.db.engine import create_engine
from sqlalchemy import text
from sqlmodel.ext.asyncio.session import AsyncSession
from webhook_hub.settings import Settings

from tests.recording_factories import rows_of
from tests.scripted_server import Reply, answer, start_scripted
from tests.test_endpoint_recovery import jobs_to, new_subscription
from tests.test_engine_recording import engine_of, plain_sender


async def test_a_set_aside_delivery_is_kept_leased_and_sent_from_memory(
    own_database: Settings,
) -> None:
    # A database of its own: the claim below would take whatever other tests left due.
    db_engine = create_engine(own_database)
    server, listener = await start_scripted(lambda _: Reply(answer(204), pause=0.3))
    settings = own_database.model_copy(update={"per_subscription_concurrency": 1})
    sender = plain_sender()
    engine = engine_of(db_engine, settings, sender)
    try:
        subscription = await new_subscription(db_engine, "http://127.0.0.1:9/hook")
        url = f"http://127.0.0.1:{server.port}/hook"
        jobs = jobs_to(subscription, url, 4)
        now = time.monotonic()
        for job in jobs:
            engine.offer(job, now)
        engine.set_aside_all()  # the three waiting behind the first
        await engine.flush()
        async with AsyncSession(db_engine) as session:
            connection = await session.connection()
            leased = await connection.scalar(
                text(
                    "SELECT count(*) FROM deliveries WHERE subscription_id = :id"
                    " AND status = 'pending' AND lease_until > now() + interval '30 s'"
                    " AND next_attempt_at > now() + interval '30 s'"
                ),
                {"id": subscription.id},
            )
        claimed = await engine.claim()
        for _ in range(100):
            if len(server.requests) >= len(jobs):
                break
            await asyncio.sleep(0.1)
        await asyncio.sleep(0.5)  # the last answer is read
        await engine.flush()
        async with AsyncSession(db_engine) as session:
            rows = await rows_of(session, subscription.id)
    finally:
        await sender.close()
        listener.close()
        await db_engine.dispose()
    assert leased == len(jobs) - 1
    assert claimed == []
    ids = [r.split(b"webhook-id: ", 1)[1].split(b"\r\n", 1)[0] for r in server.requests]
    assert sorted(ids) == sorted(job.message_id.encode() for job in jobs)
    assert [(status, attempts, logged) for status, attempts, _, logged in rows] == [
        ("succeeded", 1, 1)
    ] * len(jobs)
