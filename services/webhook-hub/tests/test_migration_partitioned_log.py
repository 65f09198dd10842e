"""Migration 0020 on a log of a million deliveries: to the partitioned tables without copying
a row (the old table becomes their first partition), and back."""

from __future__ import annotations

import uuid

import psycopg
from servicekit.testing.conformance import run_cli
from webhook_hub.settings import Settings

ROWS = 1_000_000


def counts(conn: psycopg.Connection[tuple[object, ...]]) -> tuple[object, ...]:
    row = conn.execute(
        "SELECT (SELECT count(*) FROM deliveries),"
        " (SELECT count(*) FROM deliveries WHERE status = 'pending'),"
        " (SELECT count(*) FROM delivery_attempts)"
    ).fetchone()
    assert row is not None
    return row


def kind_of(conn: psycopg.Connection[tuple[object, ...]], table: str) -> object:
    row = conn.execute("SELECT relkind FROM pg_class WHERE relname = %s", (table,)).fetchone()
    return None if row is None else row[0]


def test_a_million_deliveries_are_partitioned_without_a_copy_and_back(
    own_database: Settings,
) -> None:
    url = own_database.database_url
    run_cli("webhook-hub", own_database, "migrate", "--downgrade-to", "0019")
    subscription = uuid.uuid4()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO subscriptions (id, consumer_id, owner, endpoint_url, secret, events,"
            " is_active, headers, timeout_seconds, created_at, updated_at, failure_count)"
            " VALUES (%s, %s, 'acme', 'http://127.0.0.1:9/hook', 's', ARRAY['*'], true, '{}',"
            " 10, now(), now(), 0)",
            (subscription, uuid.uuid4()),
        )
        # A month of deliveries, one in ten still being retried, with its attempts.
        conn.execute(
            "INSERT INTO deliveries (id, subscription_id, event_id, event_type, payload,"
            " event_time, status, attempts, next_attempt_at, created_at, first_status_code,"
            " first_duration_ms)"
            " SELECT gen_random_uuid(), %s, gen_random_uuid(), 'order.paid', '{\"id\": 7}',"
            " t, CASE WHEN n %% 10 = 0 THEN 'pending' ELSE 'succeeded' END, 1,"
            " CASE WHEN n %% 10 = 0 THEN now() END, t, 200, 5"
            " FROM generate_series(1, %s) AS n,"
            " LATERAL (SELECT now() - n * interval '2.6 seconds') AS at(t)",
            (subscription, ROWS),
        )
        conn.execute(
            "INSERT INTO delivery_attempts (delivery_id, attempted_at, status_code, duration_ms)"
            " SELECT id, created_at + interval '5 seconds', 500, 5 FROM deliveries"
            " WHERE status = 'pending'"
        )
        before = counts(conn)
        storage = conn.execute("SELECT pg_relation_filenode('deliveries')").fetchone()

    run_cli("webhook-hub", own_database, "migrate")
    with psycopg.connect(url) as conn:
        assert counts(conn) == before
        assert kind_of(conn, "deliveries") == "p"
        assert kind_of(conn, "delivery_attempts") == "p"
        # The old table's own storage is the first partition: no row was written again.
        assert conn.execute("SELECT pg_relation_filenode('deliveries_legacy')").fetchone() == (
            storage
        )
        # And a second delivery of one of those events is still refused.
        inserted = conn.execute(
            "INSERT INTO deliveries (id, subscription_id, event_id, event_type, payload,"
            " event_time, status, attempts, created_at, log_time)"
            " SELECT gen_random_uuid(), subscription_id, event_id, event_type, payload,"
            " event_time, 'pending', 0, now(), log_time FROM deliveries LIMIT 1"
            " ON CONFLICT (subscription_id, event_id, log_time) DO NOTHING"
        )
        assert inserted.rowcount == 0
        conn.rollback()

    run_cli("webhook-hub", own_database, "migrate", "--downgrade-to", "0019")
    with psycopg.connect(url) as conn:
        assert counts(conn) == before
        assert kind_of(conn, "deliveries") == "r"
        assert kind_of(conn, "delivery_attempts") == "r"
