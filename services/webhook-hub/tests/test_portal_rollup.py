"""The portal charts' rollup (`delivery_hour_stats`): a settled hour is read from it, a retry
or a recover forgets the hours it makes pending again, a pending delivery keeps its hour
computed from the log, and every figure stays its owner's."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from servicekit.db.engine import create_session_factory
from servicekit.testing import HttpReceiver
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine
from webhook_hub.deliveries.hour_stats_repository import LIVE_SAMPLE, HourStatsRepository
from webhook_hub.deliveries.service import DeliveryService
from webhook_hub.portal.charts import truncate

from tests.factories import (
    Consumer,
    chart_of,
    make_consumer,
    only_test_delivery_settled,
    set_deliveries,
    signed_in,
    subscribe,
)

HOUR = timedelta(hours=1)


def hours_ago(count: int) -> datetime:
    """The start of the hour `count` hours before the current one."""
    return truncate(datetime.now(UTC), "hour") - HOUR * count


async def deliveries_in(
    engine: AsyncEngine, subscription_id: str, hour: datetime, statuses: list[str]
) -> None:
    """Deliveries with these statuses, created ten minutes into `hour`."""
    age = datetime.now(UTC) - (hour + timedelta(minutes=10))
    await set_deliveries(engine, subscription_id, [(status, age) for status in statuses])


async def attempts_in(
    engine: AsyncEngine, subscription_id: str, hour: datetime, duration_ms: int
) -> None:
    """One attempt of this duration for each of the endpoint's deliveries created in `hour`."""
    async with engine.begin() as connection:
        await connection.execute(
            text(
                "INSERT INTO delivery_attempts (delivery_id, attempted_at, status_code,"
                " duration_ms) SELECT id, created_at, 200, :ms FROM deliveries"
                " WHERE subscription_id = :sid"
                " AND created_at >= :hour AND created_at < :hour + interval '1 hour'"
            ),
            {"sid": subscription_id, "hour": hour, "ms": duration_ms},
        )


async def stored_hours(
    engine: AsyncEngine, subscription_id: str
) -> dict[datetime, tuple[int, int]]:
    """The rollup's (succeeded, failed) per stored hour of the endpoint."""
    async with engine.connect() as connection:
        rows = await connection.execute(
            text(
                "SELECT hour_start, succeeded, failed FROM delivery_hour_stats"
                " WHERE subscription_id = :sid"
            ),
            {"sid": subscription_id},
        )
        return {hour: (succeeded, failed) for hour, succeeded, failed in rows}


async def delivery_ids(
    engine: AsyncEngine, subscription_id: str, hour: datetime, status: str = "failed"
) -> list[str]:
    """The endpoint's deliveries with `status` created in `hour`."""
    async with engine.connect() as connection:
        rows = await connection.execute(
            text(
                "SELECT id FROM deliveries WHERE subscription_id = :sid AND status = :status"
                " AND created_at >= :hour AND created_at < :hour + interval '1 hour'"
            ),
            {"sid": subscription_id, "hour": hour, "status": status},
        )
        return [str(row[0]) for row in rows]


async def quiet_endpoint(
    client: httpx.AsyncClient, engine: AsyncEngine, receiver: HttpReceiver, level: str = "write"
) -> tuple[Consumer, str]:
    """A consumer's endpoint whose creation test delivery is out of the charts."""
    consumer = await make_consumer(engine, level)
    created = await subscribe(client, consumer.headers, receiver.url)
    await only_test_delivery_settled(engine, created["id"])
    return consumer, str(created["id"])


async def hour_figures(
    client: httpx.AsyncClient, subscription_id: str, hour: datetime
) -> dict[str, Any]:
    """The endpoint page's hourly chart at `hour`: each outcome's count, and p50 latency."""
    page = (await client.get(f"/portal/endpoints/{subscription_id}")).text
    hourly, latency = chart_of(page, "chart-hourly"), chart_of(page, "chart-latency")
    position = hourly["x"].index(int(hour.timestamp()))
    figures = {s["label"]: s["values"][position] for s in hourly["series"]}
    figures["p50"] = latency["series"][0]["values"][position]
    return figures


async def test_a_settled_hour_is_stored_and_then_read_from_the_rollup(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer, sid = await quiet_endpoint(client, db_engine, http_receiver)
    hour = hours_ago(3)
    await deliveries_in(db_engine, sid, hour, ["succeeded", "succeeded", "failed"])
    await attempts_in(db_engine, sid, hour, 100)
    await signed_in(client, consumer)
    first = await hour_figures(client, sid, hour)
    assert first == {"succeeded": 2, "failed": 1, "pending": 0, "p50": 100.0}
    assert (await stored_hours(db_engine, sid))[hour] == (2, 1)
    # Gone from the log behind the service's back: the page still shows the stored hour.
    async with db_engine.begin() as connection:
        await connection.execute(
            text("DELETE FROM deliveries WHERE subscription_id = :sid AND created_at >= :hour"),
            {"sid": sid, "hour": hour},
        )
    assert await hour_figures(client, sid, hour) == first


async def test_an_hours_latency_takes_first_attempts_held_by_deliveries_and_logged_ones(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer, sid = await quiet_endpoint(client, db_engine, http_receiver)
    hour = hours_ago(3)
    await deliveries_in(db_engine, sid, hour, ["succeeded", "succeeded"])
    async with db_engine.begin() as connection:
        # Each delivery's first attempt in its row (as the engine writes it since 0014) ...
        await connection.execute(
            text(
                "UPDATE deliveries SET first_status_code = 500, first_duration_ms = 100"
                " WHERE subscription_id = :sid AND created_at >= :hour"
            ),
            {"sid": sid, "hour": hour},
        )
    await attempts_in(db_engine, sid, hour, 900)  # ... and a retry each in the log.
    await signed_in(client, consumer)
    assert (await hour_figures(client, sid, hour))["p50"] == 500.0  # of 100, 100, 900, 900
    async with db_engine.connect() as connection:
        stored = await connection.execute(
            text(
                "SELECT attempts, p50_ms FROM delivery_hour_stats"
                " WHERE subscription_id = :sid AND hour_start = :hour"
            ),
            {"sid": sid, "hour": hour},
        )
        assert tuple(stored.one()) == (4, 500.0)


async def first_attempts_in(
    engine: AsyncEngine, subscription_id: str, at: datetime, count: int, duration_ms: int
) -> None:
    """`count` succeeded deliveries created at `at`, each holding its first attempt (as the
    engine writes them) of this duration."""
    async with engine.begin() as connection:
        await connection.execute(
            text(
                "INSERT INTO deliveries (id, subscription_id, event_id, event_type, payload,"
                " event_time, status, attempts, created_at, first_status_code,"
                " first_duration_ms) SELECT gen_random_uuid(), :sid, gen_random_uuid(),"
                " 'order.paid', '{}', :at, 'succeeded', 1, :at, 200, :ms"
                " FROM generate_series(1, :count)"
            ),
            {"sid": subscription_id, "at": at, "count": count, "ms": duration_ms},
        )


async def hour_latency(
    client: httpx.AsyncClient, subscription_id: str, hour: datetime
) -> tuple[float, float]:
    """The endpoint page's latency chart at `hour`: (p50, p95)."""
    latency = chart_of(
        (await client.get(f"/portal/endpoints/{subscription_id}")).text, "chart-latency"
    )
    position = latency["x"].index(int(hour.timestamp()))
    p50, p95 = (series["values"][position] for series in latency["series"])
    return p50, p95


async def latency_of_slow_then_fast(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver, hour: datetime
) -> tuple[float, float]:
    """A new endpoint's latency chart at `hour` (p50, p95), as its owner sees it, after 100
    slow attempts early in the hour, then as many fast ones as the sample holds."""
    consumer, sid = await quiet_endpoint(client, db_engine, http_receiver)
    await first_attempts_in(db_engine, sid, hour, 100, 900)
    await first_attempts_in(db_engine, sid, hour + timedelta(minutes=30), LIVE_SAMPLE, 100)
    await signed_in(client, consumer)
    return await hour_latency(client, sid, hour)


async def test_an_open_hours_latency_is_of_its_latest_deliveries(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    latency = await latency_of_slow_then_fast(client, db_engine, http_receiver, hours_ago(0))
    assert latency == (100.0, 100.0)


async def test_a_settled_hours_latency_is_of_all_its_deliveries(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    latency = await latency_of_slow_then_fast(client, db_engine, http_receiver, hours_ago(3))
    assert latency == (100.0, 900.0)


async def test_the_current_hour_is_never_stored(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer, sid = await quiet_endpoint(client, db_engine, http_receiver)
    await set_deliveries(db_engine, sid, [("succeeded", timedelta(seconds=1))])
    await signed_in(client, consumer)
    assert (await hour_figures(client, sid, hours_ago(0)))["succeeded"] == 1
    stored = await stored_hours(db_engine, sid)
    assert hours_ago(0) not in stored
    assert hours_ago(2) in stored  # over, with nothing pending: a (zero) row


async def test_a_pending_delivery_keeps_its_hour_computed_from_the_log(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer, sid = await quiet_endpoint(client, db_engine, http_receiver)
    hour = hours_ago(4)
    await deliveries_in(db_engine, sid, hour, ["pending", "succeeded"])
    await signed_in(client, consumer)
    assert (await hour_figures(client, sid, hour))["pending"] == 1
    assert hour not in await stored_hours(db_engine, sid)
    # The engine settles it (no rollup write on its path); the next view sees and stores it.
    async with db_engine.begin() as connection:
        await connection.execute(
            text(
                "UPDATE deliveries SET status = 'failed' WHERE subscription_id = :sid"
                " AND status = 'pending'"
            ),
            {"sid": sid},
        )
    figures = await hour_figures(client, sid, hour)
    assert (figures["succeeded"], figures["failed"], figures["pending"]) == (1, 1, 0)
    assert (await stored_hours(db_engine, sid))[hour] == (1, 1)


async def test_a_retry_forgets_its_hour_and_the_chart_shows_it_pending(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer, sid = await quiet_endpoint(client, db_engine, http_receiver)
    hour, other = hours_ago(3), hours_ago(5)
    await deliveries_in(db_engine, sid, hour, ["failed", "succeeded"])
    await deliveries_in(db_engine, sid, other, ["failed"])
    await signed_in(client, consumer)
    await hour_figures(client, sid, hour)
    assert (await stored_hours(db_engine, sid))[hour] == (1, 1)
    (retried,) = await delivery_ids(db_engine, sid, hour)
    response = await client.post(f"/webhooks/deliveries/{retried}/retry", headers=consumer.headers)
    assert response.status_code == 202
    stored = await stored_hours(db_engine, sid)
    assert hour not in stored
    assert stored[other] == (0, 1)  # an hour the retry did not touch stays
    figures = await hour_figures(client, sid, hour)
    assert (figures["succeeded"], figures["failed"], figures["pending"]) == (1, 0, 1)
    assert hour not in await stored_hours(db_engine, sid)


async def test_a_recover_forgets_the_hours_of_the_deliveries_it_reschedules(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer, sid = await quiet_endpoint(client, db_engine, http_receiver)
    recent, earlier = hours_ago(2), hours_ago(6)
    await deliveries_in(db_engine, sid, recent, ["failed", "failed"])
    await deliveries_in(db_engine, sid, earlier, ["failed"])
    await signed_in(client, consumer)
    await hour_figures(client, sid, recent)
    response = await client.post(
        f"/webhooks/subscriptions/{sid}/recover",
        json={"since": (earlier + 2 * HOUR).isoformat()},
        headers=consumer.headers,
    )
    assert response.json() == {"recovered": 2}
    stored = await stored_hours(db_engine, sid)
    assert recent not in stored
    assert stored[earlier] == (0, 1)  # created before `since`: still failed, still stored
    assert (await hour_figures(client, sid, recent))["pending"] == 2


async def test_a_retry_waits_while_a_page_stores_hours_of_its_endpoint(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer, sid = await quiet_endpoint(client, db_engine, http_receiver)
    await deliveries_in(db_engine, sid, hours_ago(3), ["failed"])
    (delivery_id,) = await delivery_ids(db_engine, sid, hours_ago(3))
    sessions = create_session_factory(db_engine)
    async with sessions() as reader, reader.begin():
        await HourStatsRepository(reader).lock_for_reading([uuid.UUID(sid)])

        async def retry() -> None:
            async with sessions() as writer, writer.begin():
                await DeliveryService(writer).retry(consumer.owner, uuid.UUID(delivery_id))

        retrying = asyncio.create_task(retry())
        await asyncio.sleep(0.5)
        assert not retrying.done()  # held until the page's transaction ends
    await asyncio.wait_for(retrying, 5)


async def test_deleting_an_endpoint_deletes_its_rollup(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer, sid = await quiet_endpoint(client, db_engine, http_receiver, "admin")
    await deliveries_in(db_engine, sid, hours_ago(3), ["succeeded"])
    await signed_in(client, consumer)
    await hour_figures(client, sid, hours_ago(3))
    assert await stored_hours(db_engine, sid)
    response = await client.delete(f"/webhooks/subscriptions/{sid}", headers=consumer.headers)
    assert response.status_code == 204
    assert await stored_hours(db_engine, sid) == {}


async def test_each_owner_charts_only_its_own_endpoints(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    hour = hours_ago(3)
    mine, my_sid = await quiet_endpoint(client, db_engine, http_receiver)
    theirs, their_sid = await quiet_endpoint(client, db_engine, http_receiver)
    await deliveries_in(db_engine, my_sid, hour, ["succeeded"])
    await deliveries_in(db_engine, their_sid, hour, ["failed", "failed"])
    await signed_in(client, theirs)
    assert (await hour_figures(client, their_sid, hour))["failed"] == 2
    await signed_in(client, mine)
    figures = await hour_figures(client, my_sid, hour)
    assert (figures["succeeded"], figures["failed"]) == (1, 0)
    assert (await client.get(f"/portal/endpoints/{their_sid}")).status_code == 404


async def test_an_hour_first_stored_by_the_endpoint_list_keeps_its_latency(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer, sid = await quiet_endpoint(client, db_engine, http_receiver)
    hour = hours_ago(3)
    await deliveries_in(db_engine, sid, hour, ["succeeded"])
    await attempts_in(db_engine, sid, hour, 250)
    await signed_in(client, consumer)
    assert (await client.get("/portal/endpoints")).status_code == 200
    assert (await stored_hours(db_engine, sid))[hour] == (1, 0)
    assert (await hour_figures(client, sid, hour))["p50"] == 250.0


async def test_an_hour_older_than_the_latency_chart_is_stored_without_percentiles(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer, sid = await quiet_endpoint(client, db_engine, http_receiver)
    hour = hours_ago(72)
    await deliveries_in(db_engine, sid, hour, ["succeeded"])
    await attempts_in(db_engine, sid, hour, 300)
    await signed_in(client, consumer)
    page = (await client.get(f"/portal/endpoints/{sid}")).text
    daily = chart_of(page, "chart-daily")
    assert daily["series"][0]["values"][daily["x"].index(int(truncate(hour, "day").timestamp()))]
    async with db_engine.connect() as connection:
        row = (
            await connection.execute(
                text(
                    "SELECT succeeded, p50_ms FROM delivery_hour_stats"
                    " WHERE subscription_id = :sid AND hour_start = :hour"
                ),
                {"sid": sid, "hour": hour},
            )
        ).one()
    assert tuple(row) == (1, None)  # counted for the daily chart; its latency is never shown
