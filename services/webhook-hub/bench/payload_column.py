"""`deliveries.payload` as `json` (migration 0013) against `jsonb` (before): what the delivery
path pays per row to write a payload (COPY, as the delivery store records outcomes) and to
read it back as text (as the claim does), and the bytes each row takes.

Starts an embedded PostgreSQL in a temporary folder, COPYs ROWS rows of an order-sized
payload into a table of each kind, reads them back, twice each in turn; stops by itself.
Run: `uv run --frozen python services/webhook-hub/bench/payload_column.py`.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

import psycopg
from servicekit.embedded.postgres import EmbeddedPostgres

ROWS = 100_000
PAYLOAD = json.dumps(
    {
        "id": 123456,
        "status": "paid",
        "total": "99.95",
        "currency": "EUR",
        "customer": {"id": 42, "email": "someone@example.com", "name": "Zoë Example"},
        "items": [{"sku": f"SKU-{i}", "qty": i, "price": "9.99"} for i in range(5)],
    },
    separators=(",", ":"),
)


def measure(conn: psycopg.Connection[tuple[object, ...]], kind: str) -> str:
    table = f"payload_{kind}"
    conn.execute(f"DROP TABLE IF EXISTS {table}")
    conn.execute(f"CREATE TABLE {table} (id int, payload {kind} NOT NULL)")
    started = time.perf_counter()
    with conn.cursor() as cursor, cursor.copy(f"COPY {table} (id, payload) FROM STDIN") as copy:
        for n in range(ROWS):
            copy.write_row((n, PAYLOAD))
    written = time.perf_counter() - started
    started = time.perf_counter()
    conn.execute(f"SELECT payload::text FROM {table}").fetchall()  # noqa: S608 (a constant)
    read = time.perf_counter() - started
    size = conn.execute(f"SELECT pg_total_relation_size('{table}')").fetchone()
    per_row = int(str(size[0] if size else 0)) / ROWS
    return (
        f"{kind:5}  COPY in {written * 1e6 / ROWS:5.2f} µs/row  "
        f"payload::text out {read * 1e6 / ROWS:5.2f} µs/row  {per_row:4.0f} bytes/row"
    )


def main() -> None:
    print(f"{ROWS:,} rows of a {len(PAYLOAD)}-byte payload")
    with tempfile.TemporaryDirectory() as workdir:
        postgres = EmbeddedPostgres(Path(workdir) / "pg", durable=False)
        postgres.start()
        try:
            url = postgres.url.replace("+psycopg", "")
            with psycopg.connect(url, autocommit=True) as conn:
                for _ in range(2):
                    for kind in ("jsonb", "json"):
                        print(measure(conn, kind))
        finally:
            postgres.stop()


if __name__ == "__main__":
    main()
