"""Dispatch's one read per fetched batch stays an index probe per event, whatever the
table's statistics: at a fixed 1,000 events/s on a fresh database it had become a hash join
over a sequential scan of every delivery (33 to 250 ms a batch, PostgreSQL's CPU per event
tenfold) until autovacuum got round to analysing the table."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any

import httpx
from servicekit.testing import HttpReceiver
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine
from webhook_hub.delivery_engine.store import MATCHING

from tests.factories import make_consumer, subscribe

ROWS = 20_000


def scans_of(plan: dict[str, Any]) -> list[tuple[str, str]]:
    """(node type, relation) of every scan in an EXPLAIN (FORMAT JSON) plan."""
    found = []
    if "Relation Name" in plan:
        found.append((plan["Node Type"], plan["Relation Name"]))
    for child in plan.get("Plans", []):
        found += scans_of(child)
    return found


async def test_the_stored_deliveries_lookup_probes_the_event_index_even_without_statistics(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer = await make_consumer(db_engine, "write")
    created = await subscribe(client, consumer.headers, http_receiver.url)
    async with db_engine.connect() as connection:
        written = await connection.begin()
        # Many deliveries written since the table was last analysed (as after a burst);
        # rolled back after the EXPLAIN, so other tests never see them.
        await connection.execute(
            text(
                "INSERT INTO deliveries (id, subscription_id, event_id, event_type, payload,"
                " event_time, status, attempts, created_at)"
                " SELECT gen_random_uuid(), :sub, gen_random_uuid(), 'order.paid', '{}', now(),"
                " 'succeeded', 1, now() FROM generate_series(1, :rows)"
            ),
            {"sub": created["id"], "rows": ROWS},
        )
        event_ids = "{" + ",".join(str(uuid.uuid4()) for _ in range(500)) + "}"
        log_times = "{" + ",".join([datetime.now(UTC).isoformat()] * 500) + "}"
        explained = await connection.exec_driver_sql(
            f"EXPLAIN (FORMAT JSON) {MATCHING}",
            {"types": ["order.paid", "*"], "event_ids": event_ids, "log_times": log_times},
        )
        raw = explained.scalar_one()
        await written.rollback()
    plan = (json.loads(raw) if isinstance(raw, str) else raw)[0]["Plan"]
    # The log's partitions (migration 0020), each probed by its own index.
    on_deliveries = [
        node for node, relation in scans_of(plan) if relation.startswith("deliveries_")
    ]
    assert on_deliveries, scans_of(plan)
    assert "Seq Scan" not in on_deliveries, on_deliveries
