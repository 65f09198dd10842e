"""`record_events`: many outbox rows in one statement, published as `record_event`'s are."""

from __future__ import annotations

import json

import pytest
from servicekit.events import new_event_id
from servicekit.events.outbox import NewEvent, record_events
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlmodel.ext.asyncio.session import AsyncSession

from tests.factories import Relaying, unique_event_type


async def test_events_recorded_together_are_published_in_their_order_with_their_tenants(
    committing_session: AsyncSession,
    relaying: Relaying,
) -> None:
    event_type = unique_event_type("order")
    events = [
        NewEvent(new_event_id(), event_type, {"n": n, "s": "é\n"}, tenant=f"t{n % 2}")
        for n in range(5)
    ]
    async with committing_session.begin():
        await record_events(committing_session, list(reversed(events)))
    await relaying.relay().publish_pending()

    bodies = [json.loads(m.data) for m in await relaying.messages(event_type, 5)]
    assert [b["id"] for b in bodies] == [str(e.id) for e in reversed(events)]
    assert [(b["data"], b["tenant"]) for b in bodies] == [
        ({"n": e.data["n"], "s": "é\n"}, e.tenant) for e in reversed(events)
    ]


async def test_events_recorded_together_wake_the_relay_at_commit(
    committing_session: AsyncSession,
    relaying: Relaying,
) -> None:
    event_type = unique_event_type()
    async with relaying.listening(event_type) as sub:
        async with committing_session.begin():
            await record_events(committing_session, [NewEvent(new_event_id(), event_type, {})])
        msg = await sub.next_msg(timeout=5.0)
        assert json.loads(msg.data)["type"] == event_type


async def test_a_batch_with_a_malformed_type_records_nothing(
    committing_session: AsyncSession, db_engine: AsyncEngine
) -> None:
    good = NewEvent(new_event_id(), unique_event_type(), {})
    with pytest.raises(ValueError, match="NotAType"):
        async with committing_session.begin():
            await record_events(
                committing_session, [good, NewEvent(new_event_id(), "NotAType", {})]
            )
    async with db_engine.connect() as conn:
        found = await conn.scalar(
            text("SELECT count(*) FROM outbox_events WHERE id = :id"), {"id": good.id}
        )
    assert found == 0
