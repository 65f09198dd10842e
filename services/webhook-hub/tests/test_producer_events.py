"""`POST /webhooks/events`: admin producers, idempotent on `Idempotency-Key` for 24 h. A
consumer's key submits only the types its owner registered, only for itself; an operator key
(issued by the CLI alone) submits anything for anyone."""

from __future__ import annotations

import uuid

import httpx
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.factories import Consumer, make_consumer


async def register_type(client: httpx.AsyncClient, producer: Consumer, name: str) -> str:
    """Register a type of the producer's own, named after `name` (unique per call: type names
    are global and tests share the database); returns its name."""
    unique = f"{name}-{uuid.uuid4().hex[:8]}"
    response = await client.post(
        "/webhooks/event-types",
        json={"name": unique, "description": "ours", "example_payload": {"id": 1}},
        headers=producer.headers,
    )
    assert response.status_code == 201, response.text
    return unique


async def outbox_tenant(engine: AsyncEngine, event_id: str) -> str | None:
    async with engine.connect() as conn:
        tenant = await conn.scalar(
            text("SELECT tenant FROM outbox_events WHERE id = :id"), {"id": event_id}
        )
    return None if tenant is None else str(tenant)


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
    kind = await register_type(client, producer, "invoice.paid")
    response = await client.post(
        "/webhooks/events",
        json={"type": kind, "data": {"id": 1}},
        headers={**producer.headers, "Idempotency-Key": "inv-1"},
    )
    assert response.status_code == 202
    assert await outbox_rows(db_engine, response.json()["id"]) == 1


async def test_the_same_idempotency_key_returns_the_same_id_and_records_nothing_new(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    producer = await make_consumer(db_engine, "admin")
    kind = await register_type(client, producer, "invoice.sent")
    headers = {**producer.headers, "Idempotency-Key": "order-77"}
    first = await client.post(
        "/webhooks/events", json={"type": kind, "data": {"id": 77}}, headers=headers
    )
    second = await client.post(
        "/webhooks/events", json={"type": kind, "data": {"id": 77}}, headers=headers
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
    kind = await register_type(client, producer, "invoice.sent")
    headers = {**producer.headers, "Idempotency-Key": "stale-key"}
    first = await client.post(
        "/webhooks/events", json={"type": kind, "data": {"id": 1}}, headers=headers
    )
    async with db_engine.begin() as conn:
        await conn.execute(
            text(
                "UPDATE idempotency_keys SET created_at = now() - interval '25 hours'"
                " WHERE key = 'stale-key'"
            )
        )
    second = await client.post(
        "/webhooks/events", json={"type": kind, "data": {"id": 1}}, headers=headers
    )
    assert second.status_code == 202
    assert second.json()["id"] != first.json()["id"]


async def test_keys_are_scoped_to_their_producer(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    one = await make_consumer(db_engine, "admin")
    two = await make_consumer(db_engine, "admin")
    kind = await register_type(client, one, "invoice.sent")
    other_kind = await register_type(client, two, "quote.sent")
    body = {"type": kind, "data": {"id": 1}}
    a = await client.post(
        "/webhooks/events", json=body, headers={**one.headers, "Idempotency-Key": "k"}
    )
    b = await client.post(
        "/webhooks/events",
        json={**body, "type": other_kind},
        headers={**two.headers, "Idempotency-Key": "k"},
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


async def test_a_consumer_cannot_submit_an_event_for_another_tenant(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    alice = await make_consumer(db_engine, "admin")
    bob = await make_consumer(db_engine, "admin")
    kind = await register_type(client, alice, "invoice.paid")
    response = await client.post(
        "/webhooks/events",
        json={"type": kind, "data": {"id": 1}, "tenant": bob.owner},
        headers=alice.headers,
    )
    assert response.status_code == 403
    assert response.json()["code"] == "tenant_not_allowed"


async def test_a_consumer_cannot_submit_another_services_event_type(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    alice = await make_consumer(db_engine, "admin")
    bob = await make_consumer(db_engine, "admin")
    forged = {"type": "order.paid", "data": {"id": 1}, "tenant": bob.owner}
    assert (
        await client.post("/webhooks/events", json=forged, headers=alice.headers)
    ).status_code == 403
    for body in (
        {"type": "order.paid", "data": {"id": 1}},
        {"type": "never.registered", "data": {"id": 1}},
    ):
        response = await client.post("/webhooks/events", json=body, headers=alice.headers)
        assert response.status_code == 403, body
        assert response.json()["code"] == "event_type_not_owned"


async def test_a_consumer_cannot_submit_a_type_another_consumer_registered(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    alice = await make_consumer(db_engine, "admin")
    bob = await make_consumer(db_engine, "admin")
    other_kind = await register_type(client, bob, "bobs.thing")
    response = await client.post(
        "/webhooks/events", json={"type": other_kind, "data": {}}, headers=alice.headers
    )
    assert response.status_code == 403


async def test_a_consumers_event_belongs_to_its_own_owner(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    alice = await make_consumer(db_engine, "admin")
    kind = await register_type(client, alice, "invoice.paid")
    for body in (
        {"type": kind, "data": {"id": 1}},
        {"type": kind, "data": {"id": 2}, "tenant": alice.owner},
    ):
        response = await client.post("/webhooks/events", json=body, headers=alice.headers)
        assert response.status_code == 202
        assert await outbox_tenant(db_engine, response.json()["id"]) == alice.owner


async def test_an_operator_key_submits_platform_types_for_any_tenant(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    operator = await make_consumer(db_engine, "operator")
    response = await client.post(
        "/webhooks/events",
        json={"type": "order.paid", "data": {"id": 1}, "tenant": "probe-bob"},
        headers=operator.headers,
    )
    assert response.status_code == 202
    assert await outbox_tenant(db_engine, response.json()["id"]) == "probe-bob"


async def test_event_data_with_a_number_no_float_holds_is_422_and_records_nothing(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    """Read as `inf`, the number reached the outbox's json column: a 500 before."""
    producer = await make_consumer(db_engine, "admin")
    kind = await register_type(client, producer, "invoice.paid")
    async with db_engine.connect() as conn:
        before = await conn.scalar(text("SELECT count(*) FROM outbox_events"))
    response = await client.post(
        "/webhooks/events",
        content=f'{{"type": "{kind}", "data": {{"total": 1e400}}}}',
        headers={**producer.headers, "Content-Type": "application/json"},
    )
    assert response.status_code == 422, response.text
    assert response.json() == {
        "error": "body.data.total is a number outside the range of a 64-bit float (1e400)",
        "code": "validation_error",
    }
    async with db_engine.connect() as conn:
        assert await conn.scalar(text("SELECT count(*) FROM outbox_events")) == before
