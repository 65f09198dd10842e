from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from nats.aio.client import Client as NatsClient
from nats.js import JetStreamContext
from servicekit.db.engine import create_session_factory
from servicekit.events.nats_adapter import connect_nats
from servicekit.events.stream import ensure_events_stream
from servicekit.settings import ServiceSettings
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlmodel.ext.asyncio.session import AsyncSession

from tests.factories import Consuming, Relaying


@pytest.fixture(scope="session")
def migrations_dir() -> Path:
    return Path(__file__).parent / "migrations"


@pytest.fixture(scope="session")
def kit_settings(database_url: str, nats_url: str) -> ServiceSettings:
    return ServiceSettings(database_url=database_url, nats_url=nats_url, log_json=False)


@pytest.fixture(scope="session")
async def nats_client(nats_url: str) -> AsyncIterator[NatsClient]:
    client = await connect_nats(servers=[nats_url])
    yield client
    await client.close()


@pytest.fixture(scope="session")
async def js(nats_client: NatsClient, kit_settings: ServiceSettings) -> JetStreamContext:
    context = nats_client.jetstream()
    await ensure_events_stream(context, kit_settings)
    return context


@pytest.fixture
async def committing_session(db_engine: AsyncEngine) -> AsyncIterator[AsyncSession]:
    """For tests of code that must see real commits (relay, LISTEN/NOTIFY, consumers)."""
    async with create_session_factory(db_engine)() as session:
        yield session


@pytest.fixture
def relaying(
    db_engine: AsyncEngine, js: JetStreamContext, kit_settings: ServiceSettings
) -> Relaying:
    return Relaying(db_engine, js, kit_settings)


@pytest.fixture
def consuming(js: JetStreamContext, nats_client: NatsClient, db_engine: AsyncEngine) -> Consuming:
    return Consuming(js, nats_client, db_engine)
