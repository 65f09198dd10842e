"""pytest plugin (entry point `servicekit`): session-scoped servers, a database per test
worker built by the service's own migrations, a rolled-back session per test, receivers."""

from __future__ import annotations

import os
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import NullPool
from sqlmodel.ext.asyncio.session import AsyncSession

from servicekit.db.admin import database_url_for, drop_database, ensure_database
from servicekit.db.engine import to_sqlalchemy_url
from servicekit.db.migrations import upgrade
from servicekit.embedded.nats import EmbeddedNats
from servicekit.embedded.smtp import SmtpServer
from servicekit.settings import ServiceSettings
from servicekit.testing.app import serve_app
from servicekit.testing.browser import browser, browser_page, screenshot_dir
from servicekit.testing.receiver import HttpReceiver
from servicekit.testing.servers import nats_server, postgres_server
from servicekit.testing.service import ServiceUnderTest
from servicekit.testing.tracing import RecordedSpans, recording_spans

# Browser fixtures (Playwright on Debian's chromium), for every service's tests.
__all__ = ["browser", "browser_page", "screenshot_dir"]

# A test whose fixtures reach one of these needs a server (PostgreSQL, NATS) or a browser:
# it is marked `server`, and `make test-fast` runs the others (`-m "not server"`).
SERVER_FIXTURES = frozenset({"postgres_server_url", "nats_url", "browser"})


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "server: needs PostgreSQL, NATS or a browser (set from the test's fixtures by servicekit's"
        " plugin, or by hand for a test that starts its own)",
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if SERVER_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.server)


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
def service() -> ServiceUnderTest | None:
    """A service's conftest overrides this to describe itself; the fixtures below follow."""
    return None


@pytest.fixture(scope="session")
def migrations_dir(service: ServiceUnderTest | None) -> Path | None:
    return None if service is None else service.migrations


def _described(service: ServiceUnderTest | None) -> ServiceUnderTest:
    if service is None:
        raise pytest.UsageError("override the `service` fixture to use service fixtures")
    return service


@pytest.fixture(scope="session")
def service_settings(
    service: ServiceUnderTest | None, database_url: str, nats_url: str
) -> ServiceSettings:
    return _described(service).settings(
        database_url=database_url, nats_url=nats_url, log_json=False
    )


@pytest.fixture
async def client(
    service: ServiceUnderTest | None, service_settings: ServiceSettings
) -> AsyncIterator[httpx.AsyncClient]:
    """The service's app with its lifespan running, and an HTTP client for it."""
    async with serve_app(_described(service).create_app(service_settings)) as http:
        yield http


@pytest.fixture(scope="session")
def service_command(service: ServiceUnderTest | None) -> str:
    return _described(service).command


@pytest.fixture(scope="session")
def api_prefix(service: ServiceUnderTest | None) -> str:
    return _described(service).api_prefix


@pytest.fixture(scope="session")
def error_text(service: ServiceUnderTest | None) -> Callable[[Any], str]:
    return _described(service).error_text


@pytest.fixture(scope="session")
def validation_status(service: ServiceUnderTest | None) -> int:
    return _described(service).validation_status


@pytest.fixture(scope="session")
def admin_key_headers(
    service: ServiceUnderTest | None, service_settings: ServiceSettings
) -> dict[str, str]:
    """Authorization with an admin API key of an owner of its own, made by the service's CLI
    (once a session: each run of the CLI takes a second)."""
    from servicekit.testing.conformance import create_key

    key = create_key(_described(service).command, service_settings, "admin")
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture
def fuzz_settings(
    service: ServiceUnderTest | None, service_settings: ServiceSettings
) -> Iterator[ServiceSettings]:
    """The service's settings on a database of its own, so what fuzzing creates stays there."""
    described = _described(service)
    url = database_url_for(service_settings.database_url, f"fuzz_{os.getpid()}")
    drop_database(url)
    ensure_database(url)
    upgrade(described.migrations, url)
    yield service_settings.model_copy(update={"database_url": url})
    drop_database(url)


@pytest.fixture
def fuzz_headers(
    service: ServiceUnderTest | None, fuzz_settings: ServiceSettings
) -> dict[str, str]:
    """The credentials fuzzing calls with: an admin API key (a service needing more overrides
    this)."""
    from servicekit.testing.conformance import create_key

    key = create_key(_described(service).command, fuzz_settings, "admin")
    return {"Authorization": f"Bearer {key}"}


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
    engine = create_async_engine(to_sqlalchemy_url(database_url), poolclass=NullPool)
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
def spans() -> Iterator[RecordedSpans]:
    """The spans finished during the test (the SDK is installed in-process on first use)."""
    with recording_spans() as recorded:
        yield recorded


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
