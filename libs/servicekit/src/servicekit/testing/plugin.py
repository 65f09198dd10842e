"""pytest plugin (entry point `servicekit`): session-scoped servers, a database per test
worker built by the service's own migrations, a rolled-back session per test, receivers."""

from __future__ import annotations

import os
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import NullPool
from sqlmodel.ext.asyncio.session import AsyncSession

from servicekit.db.admin import database_url_for, drop_database, ensure_database
from servicekit.db.engine import to_async_url
from servicekit.db.migrations import upgrade
from servicekit.embedded.nats import EmbeddedNats
from servicekit.embedded.smtp import SmtpServer
from servicekit.testing.receiver import HttpReceiver
from servicekit.testing.servers import nats_server, postgres_server


@pytest.fixture(scope="session")
def postgres_server_url() -> Iterator[str]:
    # Not under pytest's basetemp: pytest prunes old basetemps, which would pull the data
    # directory from under a server another concurrent run still uses.
    with (
        tempfile.TemporaryDirectory(prefix="servicekit-pg-") as workdir,
        postgres_server(Path(workdir)) as url,
    ):
        yield url


@pytest.fixture(scope="session")
def nats_url() -> Iterator[str]:
    with (
        tempfile.TemporaryDirectory(prefix="servicekit-nats-") as workdir,
        nats_server(Path(workdir)) as url,
    ):
        yield url


@pytest.fixture(scope="session")
def migrations_dir() -> Path | None:
    """A service's conftest overrides this with its `migrations/` folder."""
    return None


@pytest.fixture(scope="session")
def database_url(postgres_server_url: str, migrations_dir: Path | None) -> Iterator[str]:
    """A fresh database for this test worker, at the head of the service's migrations."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    url = database_url_for(postgres_server_url, f"test_{worker}_{os.getpid()}")
    drop_database(url)
    ensure_database(url)
    if migrations_dir is not None:
        upgrade(migrations_dir, url)
    yield url
    drop_database(url)


@pytest.fixture(scope="session")
async def db_engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    engine = create_async_engine(to_async_url(database_url), poolclass=NullPool)
    yield engine
    await engine.dispose()


@pytest.fixture
async def db_session(db_engine: AsyncEngine) -> AsyncIterator[AsyncSession]:
    """A session inside a transaction that is rolled back after the test; the code under test
    may commit (it commits a savepoint)."""
    async with db_engine.connect() as conn:
        outer = await conn.begin()
        session = AsyncSession(
            bind=conn, join_transaction_mode="create_savepoint", expire_on_commit=False
        )
        try:
            yield session
        finally:
            await session.close()
            await outer.rollback()


@pytest.fixture
async def http_receiver() -> AsyncIterator[HttpReceiver]:
    receiver = HttpReceiver()
    await receiver.start()
    yield receiver
    await receiver.stop()


@pytest.fixture
def smtp_server() -> Iterator[SmtpServer]:
    server = SmtpServer()
    server.start()
    yield server
    server.stop()


@pytest.fixture
def restartable_nats() -> Iterator[EmbeddedNats]:
    """A NATS server of the test's own, which the test may stop and start again."""
    with tempfile.TemporaryDirectory(prefix="servicekit-nats-") as workdir:
        server = EmbeddedNats(Path(workdir) / "nats")
        server.start()
        yield server
        server.stop()
