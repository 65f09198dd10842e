"""Deliveries have no foreign key to their subscription (migration 0015): what the key
guaranteed holds all the same. A deletion deletes a subscription's deliveries (a trigger), and
no delivery is written for a subscription that is gone (writers lock its row first)."""

from __future__ import annotations

import asyncio
import uuid

import psycopg
import pytest
from servicekit.testing.conformance import run_cli
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlmodel.ext.asyncio.session import AsyncSession
from webhook_hub.delivery_engine.store import DeliveryWrites
from webhook_hub.errors import SubscriptionNotFound
from webhook_hub.models import Subscription
from webhook_hub.settings import Settings

from tests.recording_factories import first_attempt, make_subscription, rows_of

# As the API deletes one: the trigger of migration 0015 takes its deliveries.
DELETE_SUBSCRIPTION = text("DELETE FROM subscriptions WHERE id = :id")


async def attempts_logged(session: AsyncSession, subscription_id: uuid.UUID) -> int:
    connection = await session.connection()
    return int(
        (
            await connection.execute(
                text(
                    "SELECT count(*) FROM delivery_attempts a"
                    " JOIN deliveries d ON d.id = a.delivery_id WHERE d.subscription_id = :id"
                ),
                {"id": subscription_id},
            )
        ).scalar_one()
    )


async def test_deleting_a_subscription_deletes_its_deliveries_and_their_attempts(
    db_session: AsyncSession, service_settings: Settings
) -> None:
    subscription = await make_subscription(db_session)
    failed = first_attempt(subscription, 500)
    await DeliveryWrites(db_session).record_outcomes([failed], service_settings)
    failed.job = failed.job.as_stored()  # its retry, in the attempt log
    failed.job.attempts = 1
    await DeliveryWrites(db_session).record_outcomes([failed], service_settings)
    assert await attempts_logged(db_session, subscription.id) == 1
    connection = await db_session.connection()
    await connection.execute(DELETE_SUBSCRIPTION, {"id": subscription.id})
    assert await rows_of(db_session, subscription.id) == []
    remaining = await connection.execute(
        text("SELECT count(*) FROM delivery_attempts WHERE delivery_id = :id"),
        {"id": failed.job.delivery_id},
    )
    assert remaining.scalar_one() == 0


async def test_deliveries_set_aside_for_a_deleted_subscription_are_not_stored(
    db_session: AsyncSession, service_settings: Settings
) -> None:
    gone, kept = await make_subscription(db_session), await make_subscription(db_session)
    waiting = [first_attempt(gone).job, first_attempt(kept).job]
    await db_session.delete(gone)
    await db_session.flush()
    await DeliveryWrites(db_session).record_outcomes([], service_settings, set_aside=waiting)
    assert await rows_of(db_session, gone.id) == []
    assert [(s, a) for s, a, _, _ in await rows_of(db_session, kept.id)] == [("pending", 0)]


async def test_a_delivery_added_for_a_deleted_subscription_is_refused(
    db_session: AsyncSession,
) -> None:
    subscription = await make_subscription(db_session)
    await db_session.delete(subscription)
    await db_session.flush()
    with pytest.raises(SubscriptionNotFound):
        await DeliveryWrites(db_session).add(
            subscription.id,
            event_id=uuid.uuid4(),
            event_type="order.paid",
            payload={"id": 1},
            event_time=subscription.created_at,
        )


async def test_a_deletion_that_waits_for_a_batch_deletes_what_the_batch_wrote(
    db_engine: AsyncEngine, service_settings: Settings, committed_subscription: Subscription
) -> None:
    """The race the key closed: a subscription deleted while the engine writes its outcomes.
    The batch holds the subscription's row; the deletion waits, then takes the rows too."""
    subscription = committed_subscription
    async with AsyncSession(db_engine) as batch:
        await DeliveryWrites(batch).record_outcomes([first_attempt(subscription)], service_settings)

        async def delete() -> None:
            async with db_engine.begin() as connection:
                await connection.execute(
                    text("SELECT id FROM subscriptions WHERE id = :id FOR UPDATE"),
                    {"id": subscription.id},
                )
                await connection.execute(DELETE_SUBSCRIPTION, {"id": subscription.id})

        deletion = asyncio.create_task(delete())
        await asyncio.sleep(0.5)
        assert not deletion.done()  # waiting for the batch's lock
        await batch.commit()
    await asyncio.wait_for(deletion, 10)
    async with AsyncSession(db_engine) as session:
        assert await rows_of(session, subscription.id) == []


async def test_a_batch_that_waits_for_a_deletion_writes_nothing_for_it(
    db_engine: AsyncEngine, service_settings: Settings, committed_subscription: Subscription
) -> None:
    subscription = committed_subscription
    async with db_engine.connect() as deleting:
        await deleting.begin()
        await deleting.execute(DELETE_SUBSCRIPTION, {"id": subscription.id})

        async def write() -> None:
            async with AsyncSession(db_engine) as batch:
                await DeliveryWrites(batch).record_outcomes(
                    [first_attempt(subscription)], service_settings
                )
                await batch.commit()

        writing = asyncio.create_task(write())
        await asyncio.sleep(0.5)
        assert not writing.done()  # waiting for the deletion's lock
        await deleting.commit()
    await asyncio.wait_for(writing, 10)
    async with AsyncSession(db_engine) as session:
        assert await rows_of(session, subscription.id) == []


def test_going_back_to_0014_restores_the_key_and_drops_deliveries_of_no_subscription(
    own_database: Settings,
) -> None:
    url = own_database.database_url
    orphan = uuid.uuid4()
    with psycopg.connect(url) as conn:
        conn.execute(
            "INSERT INTO deliveries (id, subscription_id, event_id, event_type, payload,"
            " event_time, status, attempts, created_at) VALUES (%s, %s, %s, 'order.paid',"
            " '{}', now(), 'pending', 0, now())",
            (orphan, uuid.uuid4(), uuid.uuid4()),
        )
    out = run_cli("webhook-hub", own_database, "migrate", "--downgrade-to", "0014")
    assert out.stdout.strip().endswith("database at revision 0014")
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT count(*) FROM deliveries").fetchone() == (0,)
        with pytest.raises(psycopg.errors.ForeignKeyViolation):
            conn.execute(
                "INSERT INTO deliveries (id, subscription_id, event_id, event_type, payload,"
                " event_time, status, attempts, created_at) VALUES (%s, %s, %s, 'order.paid',"
                " '{}', now(), 'pending', 0, now())",
                (uuid.uuid4(), uuid.uuid4(), uuid.uuid4()),
            )
    run_cli("webhook-hub", own_database, "migrate")
