"""Engine and sessions: psycopg 3 under SQLAlchemy's async engine. Framework-free: the
per-request session is web glue (`servicekit.web_session`)."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker, create_async_engine
from sqlmodel.ext.asyncio.session import AsyncSession

from servicekit.settings import ServiceSettings
from servicekit.tracing.setup import instrument_engine


def to_sqlalchemy_url(url: str) -> str:
    """`postgres://` or `postgresql://` as SQLAlchemy's psycopg 3 dialect wants it; that one
    dialect serves the async engine and Alembic's sync one alike."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise ValueError(f"not a database URL: {url!r}")
    if scheme.split("+")[0] not in {"postgres", "postgresql"}:
        raise ValueError(f"only PostgreSQL is supported, got {scheme!r}")
    return f"postgresql+psycopg://{rest}"


def to_libpq_url(url: str) -> str:
    """Plain `postgresql://` for psycopg's own connections (LISTEN, admin tasks)."""
    return "postgresql://" + url.partition("://")[2]


def create_engine(settings: ServiceSettings) -> AsyncEngine:
    engine = create_async_engine(
        to_sqlalchemy_url(settings.database_url),
        pool_size=settings.db_pool_size,
        max_overflow=settings.db_max_overflow,
        pool_pre_ping=True,
        pool_recycle=1800,
    )
    instrument_engine(engine)
    return engine


def create_session_factory(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    return async_sessionmaker(engine, class_=AsyncSession, expire_on_commit=False)
