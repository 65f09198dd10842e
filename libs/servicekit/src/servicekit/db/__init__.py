"""Async SQLModel engine, per-request transactions, and the Alembic wiring."""

from servicekit.db.engine import (
    SessionDep,
    create_engine,
    create_session_factory,
    get_session,
    to_async_url,
    to_sync_url,
)

__all__ = [
    "SessionDep",
    "create_engine",
    "create_session_factory",
    "get_session",
    "to_async_url",
    "to_sync_url",
]
