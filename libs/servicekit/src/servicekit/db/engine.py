"""Engine and sessions: psycopg 3 under SQLAlchemy's async engine, one transaction per request."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker, create_async_engine
from sqlmodel.ext.asyncio.session import AsyncSession

from servicekit.settings import ServiceSettings


def _with_driver(url: str, driver: str) -> str:
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise ValueError(f"not a database URL: {url!r}")
    if scheme.split("+")[0] not in {"postgres", "postgresql"}:
        raise ValueError(f"only PostgreSQL is supported, got {scheme!r}")
    return f"postgresql+{driver}://{rest}"


def to_async_url(url: str) -> str:
    """`postgres://` or `postgresql://` as SQLAlchemy's psycopg 3 dialect wants it."""
    return _with_driver(url, "psycopg")


def to_sync_url(url: str) -> str:
    """The same dialect serves both modes; kept separate so callers say what they mean."""
    return _with_driver(url, "psycopg")


def to_libpq_url(url: str) -> str:
    """Plain `postgresql://` for psycopg's own connections (LISTEN, admin tasks)."""
    return "postgresql://" + url.partition("://")[2]


def create_engine(settings: ServiceSettings) -> AsyncEngine:
    return create_async_engine(
        to_async_url(settings.database_url),
        pool_size=settings.db_pool_size,
        max_overflow=settings.db_max_overflow,
        pool_pre_ping=True,
        pool_recycle=1800,
    )


def create_session_factory(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    return async_sessionmaker(engine, class_=AsyncSession, expire_on_commit=False)


async def get_session(request: Request) -> AsyncIterator[AsyncSession]:
    """One transaction per request: committed when the endpoint returns, rolled back on error.

    Declared with scope="function" below so the commit happens before the response is sent: a
    client never sees success for a change that failed to commit.
    """
    factory: async_sessionmaker[AsyncSession] = request.app.state.session_factory
    async with factory() as session, session.begin():
        yield session


SessionDep = Annotated[AsyncSession, Depends(get_session, scope="function")]
