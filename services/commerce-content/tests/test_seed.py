"""`commerce-content seed` loads the demo data once."""

from __future__ import annotations

import uuid

import psycopg
from commerce_content.settings import Settings
from psycopg import sql
from servicekit.db.admin import database_url_for, drop_database
from servicekit.testing.conformance import run_cli


def test_seed_loads_every_kind_of_record_and_is_idempotent(service_settings: Settings) -> None:
    url = database_url_for(service_settings.database_url, f"seed_{uuid.uuid4().hex[:8]}")
    settings = service_settings.model_copy(update={"database_url": url})
    try:
        run_cli("commerce-content", settings, "migrate", "--create-database")
        first = run_cli("commerce-content", settings, "seed")
        second = run_cli("commerce-content", settings, "seed")
        assert first.stdout.strip() == "demo data loaded"
        assert second.stdout.strip() == "demo data already present"
        with psycopg.connect(url) as conn:
            roles = {r[0] for r in conn.execute("SELECT role FROM users").fetchall()}
            counts = {
                table: conn.execute(
                    sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table))
                ).fetchone()[0]  # type: ignore[index]
                for table in (
                    "products",
                    "product_variants",
                    "pages",
                    "posts",
                    "articles",
                    "comments",
                    "tags",
                )
            }
        assert roles == {"admin", "manager", "user", "guest"}
        assert all(count > 0 for count in counts.values()), counts
    finally:
        drop_database(url)
