"""Async SQLModel engine and the Alembic wiring (the per-request session is `servicekit.web_session`)."""

from servicekit.db.engine import create_engine, create_session_factory, to_sqlalchemy_url

__all__ = ["create_engine", "create_session_factory", "to_sqlalchemy_url"]
