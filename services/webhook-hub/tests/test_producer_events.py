"""`POST /webhooks/events`: admin producers, idempotent on `Idempotency-Key` for 24 h."""

from __future__ import annotations

import httpx
from factories import make_consumer
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine


async def outbox_rows(engine: AsyncEngine, event_id: str) -> int:
    async with engine.connect() as conn:
        count = await conn.scalar(
            text("SELECT count(*) FROM outbox_events WHERE id = :id"), {"id": event_id}
        )
    return int(count or 0)


async def test_an_event_is_accepted_with_202_and_its_id(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    producer = await make_consumer(db_engine, "admin")
    response = await client.post(
        "/webhooks/events",
        json={"type": "invoice.paid", "data": {"id": 1}, "tenant": "acme"},
        headers={**producer.headers, "Idempotency-Key": "inv-1"},
    )
    assert response.status_code == 202
    assert await outbox_rows(db_engine, response.json()["id"]) == 1


async def test_the_same_idempotency_key_returns_the_same_id_and_records_nothing_new(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    producer = await make_consumer(db_engine, "admin")
    headers = {**producer.headers, "Idempotency-Key": "order-77"}
    first = await client.post(
        "/webhooks/events", json={"type": "order.paid", "data": {"id": 77}}, headers=headers
    )
    second = await client.post(
        "/webhooks/events", json={"type": "order.paid", "data": {"id": 77}}, headers=headers
    )
    assert first.json()["id"] == second.json()["id"]
    assert second.headers["idempotent-replayed"] == "true"
    async with db_engine.connect() as conn:
        count = await conn.scalar(
            text("SELECT count(*) FROM outbox_events WHERE data = CAST(:d AS jsonb)"),
            {"d": '{"id": 77}'},
        )
    assert count == 1


async def test_a_key_older_than_the_window_starts_a_new_event(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    producer = await make_consumer(db_engine, "admin")
    headers = {**producer.headers, "Idempotency-Key": "stale-key"}
    first = await client.post(
        "/webhooks/events", json={"type": "order.paid", "data": {"id": 1}}, headers=headers
    )
    async with db_engine.begin() as conn:
        await conn.execute(
            text(
                "UPDATE idempotency_keys SET created_at = now() - interval '25 hours'"
                " WHERE key = 'stale-key'"
            )
        )
    second = await client.post(
        "/webhooks/events", json={"type": "order.paid", "data": {"id": 1}}, headers=headers
    )
    assert second.status_code == 202
    assert second.json()["id"] != first.json()["id"]


async def test_keys_are_scoped_to_their_producer(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    one = await make_consumer(db_engine, "admin")
    two = await make_consumer(db_engine, "admin")
    body = {"type": "order.paid", "data": {"id": 1}}
    a = await client.post(
        "/webhooks/events", json=body, headers={**one.headers, "Idempotency-Key": "k"}
    )
    b = await client.post(
        "/webhooks/events", json=body, headers={**two.headers, "Idempotency-Key": "k"}
    )
    assert a.json()["id"] != b.json()["id"]


async def test_producing_needs_the_admin_level(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    writer = await make_consumer(db_engine, "write")
    response = await client.post(
        "/webhooks/events", json={"type": "order.paid", "data": {}}, headers=writer.headers
    )
    assert response.status_code == 403


async def test_a_malformed_type_or_data_is_422(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    producer = await make_consumer(db_engine, "admin")
    for body in (
        {"type": "NoDot", "data": {}},
        {"type": "order.paid", "data": [1, 2]},
        {"type": "order.paid"},
    ):
        response = await client.post("/webhooks/events", json=body, headers=producer.headers)
        assert response.status_code == 422
