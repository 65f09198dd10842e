"""The delivery log's partitions on a real PostgreSQL: made ahead and dropped past the
retention as a clock the tests move says, a retry outliving its partition, one delivery per
event and subscription whatever partition its copies are written in, and the rollup's own
retention."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta

import msgspec
import pytest
from servicekit.db.admin import database_url_for, drop_database
from servicekit.db.engine import create_session_factory, to_sqlalchemy_url
from servicekit.events import RawCloudEvent
from servicekit.testing.conformance import run_cli
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlmodel.ext.asyncio.session import AsyncSession
from webhook_hub.deliveries.hour_stats_repository import HOURS_FROM_LOG, LIVE_SAMPLE
from webhook_hub.delivery_engine.jobs import AttemptResult, StoredDelivery
from webhook_hub.delivery_engine.maintenance import maintain, prune_rollup
from webhook_hub.delivery_engine.store import DeliveryStore, DeliveryWrites, restore_pending
from webhook_hub.models import Subscription
from webhook_hub.partitions import AHEAD, CLOCK_MARGIN, Layout, attempts_since
from webhook_hub.settings import Settings

from tests.recording_factories import first_attempt, make_subscription

# A minute wide, three minutes kept: what a soak run uses.
WIDTH = timedelta(minutes=1)
RETENTION = timedelta(minutes=3)


@pytest.fixture
def minute_settings(
    service_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Settings]:
    """A database of the test's own, migrated by the real CLI with minute-wide partitions."""
    monkeypatch.setenv("WEBHOOK_HUB_DELIVERY_PARTITION_WIDTH", "1m")
    url = database_url_for(service_settings.database_url, f"min_{uuid.uuid4().hex[:8]}")
    settings = service_settings.model_copy(
        update={
            "database_url": url,
            "delivery_partition_width": WIDTH,
            "delivery_retention_days": RETENTION / timedelta(days=1),
        }
    )
    run_cli("webhook-hub", settings, "migrate", "--create-database")
    try:
        yield settings
    finally:
        drop_database(url)


@pytest.fixture
async def own_engine(minute_settings: Settings) -> AsyncIterator[AsyncEngine]:
    engine = create_async_engine(to_sqlalchemy_url(minute_settings.database_url))
    yield engine
    await engine.dispose()


async def partitions(engine: AsyncEngine, table: str) -> set[str]:
    async with engine.connect() as connection:
        rows = await connection.execute(
            text(
                "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
                " WHERE i.inhparent = CAST(:table AS regclass)"
            ),
            {"table": table},
        )
        return set(rows.scalars())


async def test_migrate_makes_the_partitions_ahead_so_the_api_can_write_before_a_worker(
    own_database: Settings,
) -> None:
    # The default layout (a day wide). The migration's own partition reaches minutes ahead;
    # `migrate` makes the rest of today's and the days ahead, with no worker ever started.
    engine = create_async_engine(to_sqlalchemy_url(own_database.database_url))
    try:
        layout = own_database.delivery_log_layout
        tomorrow = datetime.now(UTC) + timedelta(days=1)
        made = await partitions(engine, "deliveries")
        assert f"deliveries_p{layout.slot_of(tomorrow):%Y%m%d_%H%M}" in made
        subscription = await committed_subscription_in(engine)
        async with AsyncSession(engine, expire_on_commit=False) as session:
            # The API's own write of a delivery (a test event), an hour from now.
            delivery = await DeliveryWrites(session).add(
                subscription.id,
                event_id=uuid.uuid4(),
                event_type="order.created",
                payload={"id": 1},
                event_time=datetime.now(UTC) + timedelta(hours=1),
            )
            await session.commit()
        assert delivery.id is not None
    finally:
        await engine.dispose()


async def committed_subscription_in(engine: AsyncEngine) -> Subscription:
    async with AsyncSession(engine, expire_on_commit=False) as session:
        subscription = await make_subscription(session)
        await session.commit()
    return subscription


async def test_partitions_are_made_ahead_and_dropped_whole_past_the_retention(
    minute_settings: Settings, own_engine: AsyncEngine
) -> None:
    layout = minute_settings.delivery_log_layout
    start = datetime.now(UTC)
    # Past the migration's partition (it reaches a few minutes ahead), not yet its expiry.
    soon = start + timedelta(minutes=6)
    first = await maintain(own_engine, layout, soon)
    made = await partitions(own_engine, "deliveries")
    ahead = {f"deliveries_p{layout.slot_of(soon + n * WIDTH):%Y%m%d_%H%M}" for n in range(4)}
    assert ahead <= made
    assert ahead <= set(first.created)
    assert "deliveries_legacy" in made
    assert "delivery_attempts_legacy" in await partitions(own_engine, "delivery_attempts")
    assert first.dropped == []

    later = start + timedelta(minutes=20)
    second = await maintain(own_engine, layout, later)
    now_made = await partitions(own_engine, "deliveries")
    assert "deliveries_legacy" not in now_made
    assert "delivery_attempts_legacy" not in await partitions(own_engine, "delivery_attempts")
    assert {"deliveries_legacy", "delivery_attempts_legacy"} <= set(second.dropped)
    # What is left: from the retention's edge to the partitions ahead of `later`.
    for name in now_made:
        lower = datetime.strptime(name.removeprefix("deliveries_p"), "%Y%m%d_%H%M")
        assert later - RETENTION - WIDTH <= lower.replace(tzinfo=UTC) <= later + AHEAD * WIDTH
    assert f"deliveries_p{layout.slot_of(later + AHEAD * WIDTH):%Y%m%d_%H%M}" in now_made


async def test_workers_maintaining_at_once_leave_one_doing_it(
    minute_settings: Settings, own_engine: AsyncEngine
) -> None:
    layout = minute_settings.delivery_log_layout
    async with own_engine.connect() as holder:
        # Another worker's round in progress holds the lock.
        await holder.execute(text("SELECT pg_advisory_lock(:k)"), {"k": 4242})
        skipped = await maintain(own_engine, layout, datetime.now(UTC), lock_key=4242)
        await holder.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": 4242})
    assert not skipped.locked
    assert skipped.created == []
    assert (await maintain(own_engine, layout, datetime.now(UTC), lock_key=4242)).locked


async def test_a_delivery_being_retried_outlives_its_partition_and_is_claimed_and_delivered(
    minute_settings: Settings, own_engine: AsyncEngine
) -> None:
    layout = minute_settings.delivery_log_layout
    start = datetime.now(UTC)
    await maintain(own_engine, layout, start)
    subscription = await committed_subscription_in(own_engine)
    retried, settled = uuid.uuid4(), uuid.uuid4()
    async with own_engine.begin() as connection:
        for delivery_id, status in ((retried, "pending"), (settled, "succeeded")):
            await connection.execute(
                text(
                    "INSERT INTO deliveries (id, subscription_id, event_id, event_type, payload,"
                    " event_time, status, attempts, next_attempt_at, created_at, log_time)"
                    " VALUES (:id, :sub, gen_random_uuid(), 'order.paid', '{\"id\": 7}',"
                    " :at, :status, 1, now() - interval '1 second', :at, :at)"
                ),
                {"id": delivery_id, "sub": subscription.id, "status": status, "at": start},
            )
    # Its partition expires (the clock moves on twenty minutes).
    later = start + timedelta(minutes=20)
    done = await maintain(own_engine, layout, later)
    assert done.moved == 1
    async with own_engine.connect() as connection:
        rows = (
            await connection.execute(
                text("SELECT id, status, log_time FROM deliveries WHERE subscription_id = :s"),
                {"s": subscription.id},
            )
        ).all()
    assert [(row.id, row.status, row.log_time) for row in rows] == [
        (retried, "pending", layout.slot_of(later))
    ]

    store = DeliveryStore(create_session_factory(own_engine), minute_settings)
    claimed, _ = await store.claim(
        saturated=[],
        saturated_owners=[],
        per_subscription=10,
        per_owner=10,
        limit=10,
        lease_extra=30.0,
    )
    assert [row.id for row in claimed] == [retried]
    row = claimed[0]
    job = StoredDelivery(
        delivery_id=row.id,
        subscription_id=row.subscription_id,
        event_type=row.event_type,
        event_time=row.event_time,
        payload_json=row.payload_json.encode(),
        attempts=row.attempts,
        endpoint_url=row.endpoint_url,
        secrets=[row.secret],
        headers={},
        timeout_seconds=row.timeout_seconds,
    )
    answered = AttemptResult(job, later, 200, "ok", 4, None, None)
    await store.record([answered], [])
    async with own_engine.connect() as connection:
        state = (
            await connection.execute(
                text("SELECT status, attempts FROM deliveries WHERE id = :id"), {"id": retried}
            )
        ).one()
        logged = await connection.scalar(
            text("SELECT count(*) FROM delivery_attempts WHERE delivery_id = :id"),
            {"id": retried},
        )
    assert tuple(state) == ("succeeded", 2)
    assert logged == 1


async def test_one_event_dispatched_twice_across_a_partition_boundary_is_one_delivery(
    db_session: AsyncSession, service_settings: Settings
) -> None:
    settings = service_settings.model_copy(update={"delivery_partition_width": WIDTH})
    subscription = await make_subscription(db_session)
    first = first_attempt(subscription)
    # The same event again (JetStream handed it out again), attempted and recorded two
    # minutes later: another partition of a minute's width is current by then.
    again = first_attempt(subscription)
    again.job = first.job
    written = first.job.event_time
    await DeliveryWrites(db_session, clock=lambda: written).record_outcomes([first], settings)
    await DeliveryWrites(db_session, clock=lambda: written + 2 * WIDTH).record_outcomes(
        [again], settings
    )
    connection = await db_session.connection()
    rows = (
        await connection.execute(
            text(
                "SELECT d.id, d.log_time, (SELECT count(*) FROM delivery_attempts a"
                " WHERE a.delivery_id = d.id) FROM deliveries d WHERE d.subscription_id = :s"
            ),
            {"s": subscription.id},
        )
    ).all()
    # One delivery, under its event's time; the second attempt joined its log.
    assert [tuple(row) for row in rows] == [(first.job.delivery_id, written, 1)]


async def test_dispatch_finds_a_stored_delivery_by_its_events_key(
    committed_subscription: Subscription, db_engine: AsyncEngine, service_settings: Settings
) -> None:
    store = DeliveryStore(create_session_factory(db_engine), service_settings)
    try:
        recorded = first_attempt(committed_subscription)
        await store.record([recorded], [])
        event = RawCloudEvent(
            source="test",
            type="order.paid",
            id=recorded.job.event_id or uuid.uuid4(),
            time=recorded.job.event_time,
            data=msgspec.Raw(b"{}"),
        )
        rows = await store.matching_existing([event])
    finally:
        await store.close()
    stored = {tuple(pair) for pair in rows[0][-1]}
    assert (committed_subscription.id, recorded.job.event_id) in stored


async def test_the_rollup_keeps_its_hours_longer_and_is_pruned_on_its_own(
    own_engine: AsyncEngine, minute_settings: Settings
) -> None:
    subscription = await committed_subscription_in(own_engine)
    now = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    kept = timedelta(days=minute_settings.delivery_rollup_retention_days)
    async with own_engine.begin() as connection:
        for hour in (now - kept - timedelta(hours=2), now - kept + timedelta(hours=1)):
            await connection.execute(
                text(
                    "INSERT INTO delivery_hour_stats (subscription_id, hour_start, succeeded,"
                    " failed, attempts) VALUES (:s, :h, 1, 0, 1)"
                ),
                {"s": subscription.id, "h": hour},
            )
    assert await prune_rollup(own_engine, now - kept) == 1
    async with own_engine.connect() as connection:
        left = (await connection.execute(text("SELECT hour_start FROM delivery_hour_stats"))).all()
    assert [row.hour_start for row in left] == [now - kept + timedelta(hours=1)]


def test_the_layout_is_the_settings() -> None:
    settings = Settings(delivery_partition_width="1m", delivery_retention_days=0.5)
    assert settings.delivery_log_layout == Layout(WIDTH, timedelta(hours=12))


def executed_partitions(plan: object, prefix: str) -> set[str]:
    """The partitions named `prefix...` an EXPLAIN ANALYZE (JSON) plan scanned at least once."""
    found: set[str] = set()
    if isinstance(plan, dict):
        relation = plan.get("Relation Name")
        if isinstance(relation, str) and relation.startswith(prefix) and plan["Actual Loops"]:
            found.add(relation)
        for value in plan.values():
            found |= executed_partitions(value, prefix)
    elif isinstance(plan, list):
        for value in plan:
            found |= executed_partitions(value, prefix)
    return found


async def test_an_hours_latency_reads_only_the_attempt_partitions_since_its_deliveries(
    own_database: Settings,
) -> None:
    # A month of day partitions (the default layout), the migration's own expired and gone.
    layout = own_database.delivery_log_layout
    now = datetime.now(UTC) + timedelta(days=40)
    engine = create_async_engine(to_sqlalchemy_url(own_database.database_url))
    try:
        await maintain(engine, layout, now)
        subscription = await committed_subscription_in(engine)
        created = now - timedelta(days=2)
        hour = created.replace(minute=0, second=0, microsecond=0)
        async with engine.begin() as connection:
            await connection.execute(
                text(
                    "INSERT INTO deliveries (id, subscription_id, event_id, event_type, payload,"
                    " event_time, status, attempts, created_at, completed_at, log_time,"
                    " first_status_code, first_duration_ms)"
                    " VALUES (gen_random_uuid(), :sub, gen_random_uuid(), 'order.paid', '{}',"
                    " :at, 'succeeded', 2, :at, :at, :at, 500, 40)"
                ),
                {"sub": subscription.id, "at": created},
            )
            await connection.execute(
                text(
                    "INSERT INTO delivery_attempts (delivery_id, attempted_at, status_code,"
                    " duration_ms) SELECT id, created_at + interval '1 minute', 200, 60"
                    " FROM deliveries WHERE subscription_id = :sub"
                ),
                {"sub": subscription.id},
            )
            params = {
                "sids": [subscription.id],
                "hours": [hour],
                "over": [True],
                "recent": [True],
                "charted": [True],
                "live_sample": LIVE_SAMPLE,
                "clock_margin": CLOCK_MARGIN,
            }
            plan = (
                await connection.execute(
                    text(f"EXPLAIN (ANALYZE, FORMAT JSON) {HOURS_FROM_LOG}"), params
                )
            ).scalar_one()
            figures = (await connection.execute(text(HOURS_FROM_LOG), params)).one()
        # Both attempts counted (the row's first and the logged retry) ...
        assert figures.attempts == 2
        # ... from the partitions since the delivery's creation (less the clocks' margin),
        # not every one of the month's.
        scanned = executed_partitions(plan, "delivery_attempts_p")
        since = layout.slot_of(attempts_since(created))
        assert scanned
        assert all(
            datetime.strptime(name.removeprefix("delivery_attempts_p"), "%Y%m%d_%H%M").replace(
                tzinfo=UTC
            )
            >= since
            for name in scanned
        )
        assert len(await partitions(engine, "delivery_attempts")) > len(scanned) + 20
    finally:
        await engine.dispose()


async def test_an_ordered_delivery_written_back_before_a_drop_is_in_its_keys_queue_there(
    minute_settings: Settings, own_engine: AsyncEngine
) -> None:
    # A retry made it pending again (and queued it under its old partition) after the
    # maintenance moved its partition's pending rows; the partition is then detached.
    layout = minute_settings.delivery_log_layout
    start = datetime.now(UTC)
    await maintain(own_engine, layout, start)
    subscription = await committed_subscription_in(own_engine)
    head = uuid.uuid4()
    async with own_engine.begin() as connection:
        await connection.execute(
            text(
                "INSERT INTO deliveries (id, subscription_id, event_id, event_type, payload,"
                " event_time, status, attempts, next_attempt_at, created_at, log_time,"
                " order_key, order_seq)"
                " VALUES (:id, :sub, gen_random_uuid(), 'order.paid', '{\"id\": 7}',"
                " :at, 'pending', 1, now(), :at, :at, 'order-7', 1)"
            ),
            {"id": head, "sub": subscription.id, "at": start},
        )
        await connection.execute(
            text(
                "INSERT INTO ordered_pending (subscription_id, order_key, order_seq,"
                " delivery_id, log_time) VALUES (:sub, 'order-7', 1, :id, :at)"
            ),
            {"id": head, "sub": subscription.id, "at": start},
        )
        # What DETACH leaves: the rows in a table of their own, gone from the log.
        await connection.execute(
            text("CREATE TABLE detached_for_test AS SELECT * FROM deliveries WHERE id = :id"),
            {"id": head},
        )
        await connection.execute(text("DELETE FROM deliveries WHERE id = :id"), {"id": head})
    later = start + timedelta(minutes=20)
    await maintain(own_engine, layout, later)
    target = layout.slot_of(later)

    async with own_engine.begin() as connection:
        assert await restore_pending(connection, "detached_for_test", target) == 1
        await connection.execute(text("DROP TABLE detached_for_test"))
    async with own_engine.connect() as connection:
        in_log = await connection.scalar(
            text("SELECT log_time FROM deliveries WHERE id = :id"), {"id": head}
        )
        queued = await connection.scalar(
            text("SELECT log_time FROM ordered_pending WHERE delivery_id = :id"), {"id": head}
        )
    assert in_log == target
    assert queued == target  # the claim reads the head by (id, log_time): it finds it
