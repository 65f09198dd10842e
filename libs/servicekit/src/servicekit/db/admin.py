"""Server-level tasks: creating and dropping a service's database."""

from __future__ import annotations

import psycopg
from psycopg import sql

from servicekit.db.engine import to_libpq_url


def database_url_for(server_url: str, database: str) -> str:
    """The URL of `database` on the server that `server_url` points at."""
    base, _, query = to_libpq_url(server_url).partition("?")
    head, _, _ = base.rpartition("/")
    return f"{head}/{database}" + (f"?{query}" if query else "")


def database_name(url: str) -> str:
    base = url.partition("?")[0]
    return base.rpartition("/")[2]


def ensure_database(url: str) -> bool:
    """Create the database `url` names when it is missing; True when it was created."""
    name = database_name(url)
    with psycopg.connect(database_url_for(url, "postgres"), autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if exists:
            return False
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return True


def drop_database(url: str) -> None:
    name = database_name(url)
    with psycopg.connect(database_url_for(url, "postgres"), autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
