"""Migration 0014 (first attempts held by their deliveries' rows) undone: `migrate
--downgrade-to 0013` before going back to a release that reads attempts from the log only."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import psycopg
from servicekit.testing.conformance import run_cli
from webhook_hub.settings import Settings


def test_going_back_to_0013_moves_first_attempts_into_the_log_and_forgets_their_hours(
    own_database: Settings,
) -> None:
    url = own_database.database_url
    subscription, delivery = uuid.uuid4(), uuid.uuid4()
    created = datetime.now(UTC).replace(minute=20, second=0, microsecond=0) - timedelta(hours=3)
    hour = created.replace(minute=0)
    with psycopg.connect(url) as conn:
        conn.execute(
            "INSERT INTO subscriptions (id, consumer_id, owner, endpoint_url, secret, events,"
            " is_active, headers, timeout_seconds, created_at, updated_at, failure_count)"
            " VALUES (%s, %s, 'acme', 'http://127.0.0.1:9/hook', 's', ARRAY['*'], true, '{}',"
            " 10, now(), now(), 0)",
            (subscription, uuid.uuid4()),
        )
        conn.execute(
            "INSERT INTO deliveries (id, subscription_id, event_id, event_type, payload,"
            " event_time, status, attempts, created_at, first_status_code,"
            " first_response_body, first_duration_ms) VALUES (%s, %s, %s, 'order.paid',"
            " '{}', %s, 'succeeded', 1, %s, 200, 'ok', 42)",
            (delivery, subscription, uuid.uuid4(), created, created),
        )
        for start in (hour - timedelta(hours=1), hour):
            conn.execute(
                "INSERT INTO delivery_hour_stats (subscription_id, hour_start, succeeded,"
                " failed, attempts, p50_ms, p95_ms) VALUES (%s, %s, 1, 0, 1, 42, 42)",
                (subscription, start),
            )
    out = run_cli("webhook-hub", own_database, "migrate", "--downgrade-to", "0013")
    assert out.stdout.strip().endswith("database at revision 0013")
    with psycopg.connect(url) as conn:
        logged = conn.execute(
            "SELECT attempted_at, status_code, response_body, duration_ms FROM"
            " delivery_attempts WHERE delivery_id = %s",
            (delivery,),
        ).fetchall()
        assert logged == [(created, 200, "ok", 42)]
        hours = conn.execute("SELECT hour_start FROM delivery_hour_stats").fetchall()
        assert hours == [(hour - timedelta(hours=1),)]  # the hour before the first is kept
        columns = conn.execute(
            "SELECT column_name FROM information_schema.columns"
            " WHERE table_name = 'deliveries' AND column_name LIKE 'first_%'"
        ).fetchall()
        assert columns == []
    # And forward again: the attempt stays in the log, once.
    run_cli("webhook-hub", own_database, "migrate")
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT d.first_duration_ms, count(a.id) FROM deliveries d"
            " JOIN delivery_attempts a ON a.delivery_id = d.id GROUP BY d.id, d.log_time"
        ).fetchone()
        assert row == (None, 1)
