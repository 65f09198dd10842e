"""`POST /webhooks/events` in one API process is a group commit: concurrent requests are
judged and written together, one transaction for all of them, each answered with its own
result once that transaction has committed (producer_events/group_commit.py)."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import httpx
import pytest
from servicekit.auth import AccessLevel
from servicekit.auth.dependencies import Principal
from servicekit.db.engine import create_session_factory, to_sqlalchemy_url
from servicekit.embedded.network import free_port
from servicekit.testing.app import serve_app
from servicekit.testing.tracing import RecordedSpans
from servicekit.tracing.setup import active_tracer
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from webhook_hub.app import create_app
from webhook_hub.errors import EventDataInvalid, EventNotRecorded, EventTypeNotOwned
from webhook_hub.producer_events.group_commit import SingleEvents
from webhook_hub.producer_events.schemas import EventSubmission
from webhook_hub.settings import Settings

from tests.factories import Consumer, make_consumer
from tests.test_event_batches import schema_type

EVENTS = "/webhooks/events"
WINDOW = timedelta(hours=24)


async def recorded(engine: AsyncEngine, ids: list[str]) -> dict[str, object]:
    """Each id's recorded `data.n`, for the ids that have an outbox row."""
    async with engine.connect() as conn:
        rows = await conn.execute(
            text("SELECT id::text, data->'n' FROM outbox_events WHERE id::text = ANY(:ids)"),
            {"ids": ids},
        )
        return {row[0]: row[1] for row in rows}


def principal_of(producer: Consumer) -> Principal:
    return Principal(owner=producer.owner, level=AccessLevel.ADMIN, key_id=uuid.uuid4())


async def test_concurrent_events_are_each_accepted_with_their_own_id_and_all_recorded(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    producer = await make_consumer(db_engine, "admin")
    kind = await schema_type(client, producer)
    responses = await asyncio.gather(
        *(
            client.post(
                EVENTS, json={"type": kind, "data": {"total": 1, "n": n}}, headers=producer.headers
            )
            for n in range(40)
        )
    )
    assert [response.status_code for response in responses] == [202] * 40
    ids = [response.json()["id"] for response in responses]
    assert len(set(ids)) == 40
    # Every answer names the row of its own request's event.
    assert await recorded(db_engine, ids) == dict(zip(ids, range(40), strict=True))


async def test_concurrent_requests_with_one_idempotency_key_record_one_event(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    producer = await make_consumer(db_engine, "admin")
    kind = await schema_type(client, producer)
    headers = {**producer.headers, "Idempotency-Key": f"order-{uuid.uuid4().hex[:8]}"}
    responses = await asyncio.gather(
        *(
            client.post(EVENTS, json={"type": kind, "data": {"total": n}}, headers=headers)
            for n in range(12)
        )
    )
    assert [response.status_code for response in responses] == [202] * 12
    ids = {response.json()["id"] for response in responses}
    assert len(ids) == 1
    replayed = [response.headers.get("idempotent-replayed") for response in responses]
    assert sorted(replayed, key=str) == [None, *["true"] * 11]
    assert len(await recorded(db_engine, list(ids))) == 1


async def test_events_refused_in_a_flush_refuse_only_themselves(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    producer = await make_consumer(db_engine, "admin")
    kind = await schema_type(client, producer)
    events = SingleEvents(create_session_factory(db_engine), WINDOW, max_items=500)
    principal = principal_of(producer)
    bodies = [
        EventSubmission(type=kind, data={"total": 1, "n": 0}),
        EventSubmission(type=kind, data={"total": "x", "n": 1}),
        EventSubmission(type="order.paid", data={"n": 2}),
        EventSubmission(type=kind, data={"total": 3, "n": 3}),
    ]
    outcomes = await asyncio.gather(
        *(events.submit(principal, body, None) for body in bodies), return_exceptions=True
    )
    assert events.commits.flushes == 1  # all four were in one flush
    assert isinstance(outcomes[1], EventDataInvalid)
    assert isinstance(outcomes[2], EventTypeNotOwned)
    accepted = [outcomes[0], outcomes[3]]
    assert all(isinstance(outcome, tuple) for outcome in accepted)
    ids = [str(outcome[0]) for outcome in accepted if isinstance(outcome, tuple)]
    assert await recorded(db_engine, ids) == {ids[0]: 0, ids[1]: 3}


async def test_an_event_the_database_refuses_fails_alone_and_the_rest_of_its_flush_is_recorded(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    """A NUL character no jsonb holds (the HTTP layer refuses it before; here it stands for
    any item the database refuses): the flush fails, and is tried again item by item."""
    producer = await make_consumer(db_engine, "admin")
    kind = await schema_type(client, producer)
    events = SingleEvents(create_session_factory(db_engine), WINDOW, max_items=500)
    principal = principal_of(producer)
    bodies = [
        EventSubmission(type=kind, data={"total": 1, "n": n, "note": "\x00" if n == 2 else ""})
        for n in range(5)
    ]
    outcomes = await asyncio.gather(
        *(events.submit(principal, body, None) for body in bodies), return_exceptions=True
    )
    assert isinstance(outcomes[2], Exception)
    ids = [str(outcome[0]) for outcome in outcomes if isinstance(outcome, tuple)]
    assert len(ids) == 4
    assert sorted((await recorded(db_engine, ids)).values()) == [0, 1, 3, 4]  # type: ignore[type-var]


async def test_a_flush_the_database_cannot_take_fails_each_of_its_events_as_not_recorded(
    db_engine: AsyncEngine,
) -> None:
    producer = await make_consumer(db_engine, "admin")
    nowhere = create_async_engine(
        to_sqlalchemy_url(f"postgresql://postgres@127.0.0.1:{free_port()}/nowhere")
    )
    events = SingleEvents(create_session_factory(nowhere), WINDOW, max_items=500)
    outcomes = await asyncio.gather(
        *(
            events.submit(principal_of(producer), EventSubmission(type="a.b", data={}), None)
            for _ in range(3)
        ),
        return_exceptions=True,
    )
    await nowhere.dispose()
    assert events.commits.flushes == 1
    assert all(isinstance(outcome, EventNotRecorded) for outcome in outcomes)


async def test_an_event_whose_flush_cannot_reach_the_database_is_answered_503_not_202(
    service_settings: Settings, db_engine: AsyncEngine
) -> None:
    producer = await make_consumer(db_engine, "admin")
    app = create_app(service_settings)
    nowhere = create_async_engine(
        to_sqlalchemy_url(f"postgresql://postgres@127.0.0.1:{free_port()}/nowhere")
    )
    async with serve_app(app) as http:
        kind = await schema_type(http, producer)
        # The process's database goes away for its writes (authentication still reads it).
        app.state.single_events = SingleEvents(create_session_factory(nowhere), WINDOW, 500)
        response = await http.post(
            EVENTS,
            json={"type": kind, "data": {"total": 1}},
            headers={**producer.headers, "Idempotency-Key": "lost-1"},
        )
    await nowhere.dispose()
    assert response.status_code == 503
    assert response.json()["code"] == "event_not_recorded"
    assert response.headers["retry-after"] == "1"


@pytest.mark.parametrize("max_items", [1, 500])
async def test_each_event_is_answered_after_its_flush_commits(
    client: httpx.AsyncClient, db_engine: AsyncEngine, max_items: int
) -> None:
    """Whatever the flush size, an answer's event is readable by another connection."""
    producer = await make_consumer(db_engine, "admin")
    kind = await schema_type(client, producer)
    events = SingleEvents(create_session_factory(db_engine), WINDOW, max_items=max_items)
    principal = principal_of(producer)
    outcomes = await asyncio.gather(
        *(
            events.submit(principal, EventSubmission(type=kind, data={"total": 1, "n": n}), None)
            for n in range(6)
        )
    )
    assert events.commits.flushes == (6 if max_items == 1 else 1)
    ids = [str(event_id) for event_id, _ in outcomes]
    assert len(await recorded(db_engine, ids)) == 6


async def test_each_event_of_a_flush_is_recorded_in_its_own_requests_trace(
    client: httpx.AsyncClient, db_engine: AsyncEngine, spans: RecordedSpans
) -> None:
    producer = await make_consumer(db_engine, "admin")
    kind = await schema_type(client, producer)
    events = SingleEvents(create_session_factory(db_engine), WINDOW, max_items=500)
    principal = principal_of(producer)

    async def traced_request(n: int) -> tuple[int, str]:
        with active_tracer().start_as_current_span(f"request {n}") as span:
            event_id, _ = await events.submit(
                principal, EventSubmission(type=kind, data={"total": n}), None
            )
            return span.get_span_context().span_id, str(event_id)

    requests = await asyncio.gather(*(traced_request(n) for n in range(3)))
    assert events.commits.flushes == 1
    for span_id, event_id in requests:
        [record] = [
            span
            for span in spans.finished
            if span.name == f"outbox record {kind}"
            and span.attributes is not None
            and span.attributes.get("messaging.message.id") == event_id
        ]
        assert record.parent is not None
        assert record.parent.span_id == span_id
