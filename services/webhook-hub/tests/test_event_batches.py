"""`POST /webhooks/events/batch`: up to 500 events, each judged exactly as the single form
judges it, one result per event in order; the accepted ones recorded in one transaction."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine
from webhook_hub.producer_events.service import first_of_each_key

from tests.factories import Consumer, make_consumer
from tests.test_producer_events import outbox_rows, outbox_tenant

BATCH = "/webhooks/events/batch"
SCHEMA = {"type": "object", "properties": {"total": {"type": "number"}}, "required": ["total"]}


async def schema_type(client: httpx.AsyncClient, producer: Consumer) -> str:
    """A type of the producer's own whose events need a numeric `total`."""
    name = f"invoice.paid-{uuid.uuid4().hex[:8]}"
    response = await client.post(
        "/webhooks/event-types",
        json={"name": name, "schema": SCHEMA, "example_payload": {"total": 1}},
        headers=producer.headers,
    )
    assert response.status_code == 201, response.text
    return name


async def producer_and_type(client: httpx.AsyncClient, engine: AsyncEngine) -> tuple[Consumer, str]:
    """A new admin consumer and a `schema_type` of its own."""
    producer = await make_consumer(engine, "admin")
    return producer, await schema_type(client, producer)


async def single_with_key(
    client: httpx.AsyncClient, producer: Consumer, kind: str, key: str
) -> httpx.Response:
    """One event of `kind` through the single form, under the idempotency key `key`."""
    return await client.post(
        "/webhooks/events",
        json={"type": kind, "data": {"total": 1}},
        headers={**producer.headers, "Idempotency-Key": key},
    )


async def batch(
    client: httpx.AsyncClient, producer: Consumer, events: list[Any]
) -> list[dict[str, Any]]:
    response = await client.post(BATCH, json={"events": events}, headers=producer.headers)
    assert response.status_code == 200, response.text
    results: list[dict[str, Any]] = response.json()["results"]
    assert len(results) == len(events)
    return results


async def outbox_count(engine: AsyncEngine) -> int:
    async with engine.connect() as conn:
        return int(await conn.scalar(text("SELECT count(*) FROM outbox_events")) or 0)


async def test_each_event_is_accepted_with_its_own_id_and_recorded_in_order(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    producer, kind = await producer_and_type(client, db_engine)
    results = await batch(
        client, producer, [{"type": kind, "data": {"total": n}} for n in range(3)]
    )
    assert [r["result"] for r in results] == ["accepted"] * 3
    assert [r["status"] for r in results] == [202] * 3
    ids = [r["id"] for r in results]
    assert len(set(ids)) == 3
    async with db_engine.connect() as conn:
        rows = (
            await conn.execute(
                text(
                    "SELECT id::text, data->>'total' FROM outbox_events"
                    " WHERE id = ANY(CAST(:ids AS uuid[])) ORDER BY seq"
                ),
                {"ids": ids},
            )
        ).all()
    assert [tuple(row) for row in rows] == [(ids[n], str(n)) for n in range(3)]


async def test_the_answer_counts_accepted_duplicate_and_refused_events(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    producer, kind = await producer_and_type(client, db_engine)
    events = [
        {"type": kind, "data": {"total": 1}, "idempotency_key": "k"},
        {"type": kind, "data": {"total": 1}, "idempotency_key": "k"},
        {"type": kind, "data": {"total": "x"}},
    ]
    response = await client.post(BATCH, json={"events": events}, headers=producer.headers)
    body = response.json()
    assert (body["accepted"], body["duplicates"], body["refused"]) == (1, 1, 1)


async def test_an_event_breaking_its_schema_is_refused_alone_with_the_single_forms_error(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    producer, kind = await producer_and_type(client, db_engine)
    bad = {"type": kind, "data": {"total": "x"}}
    before = await outbox_count(db_engine)
    results = await batch(
        client, producer, [{"type": kind, "data": {"total": 1}}, bad, {"type": kind, "data": {}}]
    )
    alone = await client.post("/webhooks/events", json=bad, headers=producer.headers)
    assert [r["result"] for r in results] == ["accepted", "refused", "refused"]
    refused = results[1]
    assert refused["status"] == alone.status_code == 422
    assert {k: refused[k] for k in ("code", "error", "errors")} == alone.json()
    assert await outbox_rows(db_engine, results[0]["id"]) == 1
    assert await outbox_count(db_engine) == before + 1


async def test_a_malformed_event_is_refused_alone_as_the_single_form_refuses_its_body(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    producer, kind = await producer_and_type(client, db_engine)
    malformed: list[Any] = [
        {"type": "NoDot", "data": {}},
        {"type": kind},
        {"type": kind, "data": [1, 2]},
        {"type": kind, "data": {"total": 1}, "extra": True},
    ]
    results = await batch(client, producer, [*malformed, {"type": kind, "data": {"total": 2}}])
    assert [r["result"] for r in results] == ["refused"] * 4 + ["accepted"]
    for event, result in zip(malformed, results, strict=False):
        alone = await client.post("/webhooks/events", json=event, headers=producer.headers)
        assert result["status"] == alone.status_code == 422
        assert (result["code"], result["error"]) == (alone.json()["code"], alone.json()["error"])


async def test_an_event_that_is_not_an_object_is_refused_alone(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    producer, kind = await producer_and_type(client, db_engine)
    results = await batch(client, producer, [5, "x", None, {"type": kind, "data": {"total": 1}}])
    assert [r["result"] for r in results] == ["refused"] * 3 + ["accepted"]
    assert {r["code"] for r in results[:3]} == {"validation_error"}


async def test_an_idempotency_key_over_200_characters_is_refused_alone(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    producer, kind = await producer_and_type(client, db_engine)
    results = await batch(
        client,
        producer,
        [
            {"type": kind, "data": {"total": 1}, "idempotency_key": "k" * 201},
            {"type": kind, "data": {"total": 1}, "idempotency_key": "k" * 200},
        ],
    )
    assert [(r["result"], r["status"]) for r in results] == [("refused", 422), ("accepted", 202)]


async def test_a_key_repeated_in_a_batch_answers_the_first_events_id_and_records_it_once(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    producer, kind = await producer_and_type(client, db_engine)
    results = await batch(
        client,
        producer,
        [
            {"type": kind, "data": {"total": 1}, "idempotency_key": "order-1"},
            {"type": kind, "data": {"total": 2}},
            {"type": kind, "data": {"total": 1}, "idempotency_key": "order-1"},
        ],
    )
    assert [r["result"] for r in results] == ["accepted", "accepted", "duplicate"]
    assert results[2]["id"] == results[0]["id"]
    assert results[2]["status"] == 202
    assert await outbox_rows(db_engine, results[0]["id"]) == 1


async def test_a_key_of_the_single_form_is_a_duplicate_in_a_batch(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    producer, kind = await producer_and_type(client, db_engine)
    single = await single_with_key(client, producer, kind, "inv-9")
    (result,) = await batch(
        client, producer, [{"type": kind, "data": {"total": 1}, "idempotency_key": "inv-9"}]
    )
    assert (result["result"], result["id"]) == ("duplicate", single.json()["id"])


async def test_a_key_of_a_batch_is_replayed_by_the_single_form(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    producer, kind = await producer_and_type(client, db_engine)
    (result,) = await batch(
        client, producer, [{"type": kind, "data": {"total": 1}, "idempotency_key": "inv-10"}]
    )
    single = await single_with_key(client, producer, kind, "inv-10")
    assert single.status_code == 202
    assert single.json()["id"] == result["id"]
    assert single.headers["idempotent-replayed"] == "true"


async def test_a_refused_event_does_not_use_its_key_up(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    producer, kind = await producer_and_type(client, db_engine)
    results = await batch(
        client,
        producer,
        [
            {"type": kind, "data": {"total": "x"}, "idempotency_key": "retry-me"},
            {"type": kind, "data": {"total": 1}, "idempotency_key": "retry-me"},
        ],
    )
    assert [r["result"] for r in results] == ["refused", "accepted"]
    assert await outbox_rows(db_engine, results[1]["id"]) == 1


async def test_a_key_older_than_the_window_starts_a_new_event_in_a_batch(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    producer, kind = await producer_and_type(client, db_engine)
    event = {"type": kind, "data": {"total": 1}, "idempotency_key": "aged"}
    (first,) = await batch(client, producer, [event])
    async with db_engine.begin() as conn:
        await conn.execute(
            text(
                "UPDATE idempotency_keys SET created_at = now() - interval '25 hours'"
                " WHERE owner = :owner AND key = 'aged'"
            ),
            {"owner": producer.owner},
        )
    (second,) = await batch(client, producer, [event])
    assert second["result"] == "accepted"
    assert second["id"] != first["id"]


async def test_keys_are_scoped_to_their_owner_in_batches(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    one, kind_one = await producer_and_type(client, db_engine)
    two, kind_two = await producer_and_type(client, db_engine)
    (a,) = await batch(
        client, one, [{"type": kind_one, "data": {"total": 1}, "idempotency_key": "k"}]
    )
    (b,) = await batch(
        client, two, [{"type": kind_two, "data": {"total": 1}, "idempotency_key": "k"}]
    )
    assert (a["result"], b["result"]) == ("accepted", "accepted")
    assert a["id"] != b["id"]


async def test_a_consumers_events_for_another_tenant_or_type_are_refused_alone(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    alice, kind = await producer_and_type(client, db_engine)
    bob, bobs_kind = await producer_and_type(client, db_engine)
    results = await batch(
        client,
        alice,
        [
            {"type": kind, "data": {"total": 1}, "tenant": bob.owner},
            {"type": "order.paid", "data": {"id": 1}},
            {"type": bobs_kind, "data": {"total": 1}},
            {"type": kind, "data": {"total": 1}},
        ],
    )
    assert [(r["status"], r.get("code")) for r in results] == [
        (403, "tenant_not_allowed"),
        (403, "event_type_not_owned"),
        (403, "event_type_not_owned"),
        (202, None),
    ]
    assert await outbox_tenant(db_engine, results[3]["id"]) == alice.owner


async def test_an_event_of_a_deactivated_type_is_refused_alone(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    operator = await make_consumer(db_engine, "operator")
    results = await batch(
        client,
        operator,
        [{"type": "legacy.retired", "data": {}}, {"type": "order.paid", "data": {"id": 1}}],
    )
    assert [(r["status"], r.get("code")) for r in results] == [
        (422, "event_type_inactive"),
        (202, None),
    ]


async def test_an_operator_batches_any_type_for_any_tenant(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    operator = await make_consumer(db_engine, "operator")
    results = await batch(
        client,
        operator,
        [
            {"type": "order.paid", "data": {"id": 1}, "tenant": "probe-bob"},
            {"type": "never.registered", "data": {"x": 1}},
        ],
    )
    assert [r["result"] for r in results] == ["accepted", "accepted"]
    assert await outbox_tenant(db_engine, results[0]["id"]) == "probe-bob"
    assert await outbox_tenant(db_engine, results[1]["id"]) is None


async def test_batches_need_the_admin_level(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    writer = await make_consumer(db_engine, "write")
    body = {"events": [{"type": "order.paid", "data": {}}]}
    assert (await client.post(BATCH, json=body, headers=writer.headers)).status_code == 403
    assert (await client.post(BATCH, json=body)).status_code == 401


async def test_500_events_are_accepted_and_501_refuse_the_whole_batch(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    producer, kind = await producer_and_type(client, db_engine)
    event = {"type": kind, "data": {"total": 1}}
    results = await batch(client, producer, [event] * 500)
    assert {r["result"] for r in results} == {"accepted"}
    before = await outbox_count(db_engine)
    response = await client.post(BATCH, json={"events": [event] * 501}, headers=producer.headers)
    assert response.status_code == 422
    assert response.json()["code"] == "validation_error"
    assert await outbox_count(db_engine) == before


async def test_a_body_that_is_not_a_batch_is_422_for_the_whole(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    producer = await make_consumer(db_engine, "admin")
    json_headers = {**producer.headers, "Content-Type": "application/json"}
    for body in ('{"events": []}', '{"events": {}}', "[]", '{"type": "order.paid"}', "{nope"):
        response = await client.post(BATCH, content=body, headers=json_headers)
        assert response.status_code == 422, body
        assert response.json()["code"] == "validation_error", body


def test_a_repeated_key_points_at_its_first_occurrence() -> None:
    assert first_of_each_key(["a", None, "b", "a", None, "b", "a"]) == {3: 0, 5: 2, 6: 0}
    assert first_of_each_key([None, None]) == {}


async def test_a_number_no_float_holds_refuses_the_whole_batch(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    """The input guard reads the whole body before any event is parsed (see the README)."""
    producer, kind = await producer_and_type(client, db_engine)
    before = await outbox_count(db_engine)
    response = await client.post(
        BATCH,
        content=(
            f'{{"events": [{{"type": "{kind}", "data": {{"total": 1}}}},'
            f' {{"type": "{kind}", "data": {{"total": 1e400}}}}]}}'
        ),
        headers={**producer.headers, "Content-Type": "application/json"},
    )
    assert response.status_code == 422
    assert response.json()["code"] == "validation_error"
    assert await outbox_count(db_engine) == before


async def test_events_are_checked_against_the_types_schema_as_changed_since_the_last_event(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    """Validators are cached by the schema's text: a changed schema is never checked stale."""
    producer, kind = await producer_and_type(client, db_engine)
    event = {"type": kind, "data": {"total": 1}}
    assert (
        await client.post("/webhooks/events", json=event, headers=producer.headers)
    ).status_code == 202
    stricter = {**SCHEMA, "required": ["total", "currency"]}
    patched = await client.patch(
        f"/webhooks/event-types/{kind}",
        json={"schema": stricter, "example_payload": {"total": 1, "currency": "EUR"}},
        headers=producer.headers,
    )
    assert patched.status_code == 200, patched.text
    (result,) = await batch(client, producer, [event])
    assert (result["status"], result["code"]) == (422, "event_data_invalid")
