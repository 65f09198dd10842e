"""Migration 0021 (retry schedule and timeout per subscription): a stored timeout of 10, the
column's old default, becomes "not set" (null, so the owner's default or the service's
applies); a chosen one stays; going back to 0020 gives every subscription a number again."""

from __future__ import annotations

import uuid

import psycopg
from servicekit.testing.conformance import run_cli
from webhook_hub.settings import Settings


def _subscription(conn: psycopg.Connection[tuple[object, ...]], timeout: int) -> uuid.UUID:
    subscription = uuid.uuid4()
    conn.execute(
        "INSERT INTO subscriptions (id, consumer_id, owner, endpoint_url, secret, events,"
        " is_active, headers, timeout_seconds, created_at, updated_at, failure_count)"
        " VALUES (%s, %s, 'acme', 'http://127.0.0.1:9/hook', 's', ARRAY['*'], true, '{}',"
        " %s, now(), now(), 0)",
        (subscription, uuid.uuid4(), timeout),
    )
    return subscription


def test_old_default_timeouts_become_unset_chosen_ones_stay_and_back_again(
    own_database: Settings,
) -> None:
    url = own_database.database_url
    run_cli("webhook-hub", own_database, "migrate", "--downgrade-to", "0020")
    with psycopg.connect(url) as conn:
        left, chosen = _subscription(conn, 10), _subscription(conn, 25)
    run_cli("webhook-hub", own_database, "migrate")
    with psycopg.connect(url) as conn:
        timeouts: dict[object, object] = dict(
            conn.execute(
                "SELECT id, timeout_seconds FROM subscriptions WHERE id IN (%s, %s)",
                (left, chosen),
            ).fetchall()
        )
        assert timeouts == {left: None, chosen: 25}
        conn.execute("UPDATE subscriptions SET retry_schedule = '{5,60}' WHERE id = %s", (left,))
    out = run_cli("webhook-hub", own_database, "migrate", "--downgrade-to", "0020")
    assert out.stdout.strip().endswith("database at revision 0020")
    with psycopg.connect(url) as conn:
        timeouts = dict(conn.execute("SELECT id, timeout_seconds FROM subscriptions").fetchall())
        assert timeouts == {left: 10, chosen: 25}
