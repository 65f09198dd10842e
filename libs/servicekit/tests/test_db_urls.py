"""Database URLs as each client wants them: SQLAlchemy's psycopg dialect, or plain libpq."""

from __future__ import annotations

import pytest
from servicekit.db.engine import to_libpq_url, to_sqlalchemy_url


@pytest.mark.parametrize(
    "url",
    [
        "postgres://u:p@h:5432/db",
        "postgresql://u:p@h:5432/db",
        "postgresql+asyncpg://u:p@h:5432/db",
    ],
)
def test_a_postgres_url_gets_the_psycopg_dialect(url: str) -> None:
    assert to_sqlalchemy_url(url) == "postgresql+psycopg://u:p@h:5432/db"


@pytest.mark.parametrize(
    ("url", "reason"),
    [("mysql://u:p@h/db", "only PostgreSQL is supported"), ("h:5432/db", "not a database URL")],
)
def test_anything_but_a_postgres_url_is_refused(url: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        to_sqlalchemy_url(url)


def test_libpq_gets_the_url_without_a_dialect() -> None:
    assert (
        to_libpq_url("postgresql+psycopg://u:p@h/db?sslmode=off")
        == "postgresql://u:p@h/db?sslmode=off"
    )
