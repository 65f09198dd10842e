from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import nats
import pytest
from nats.aio.client import Client as NatsClient
from nats.js import JetStreamContext
from servicekit.db.admin import database_url_for, drop_database
from servicekit.db.engine import create_session_factory
from servicekit.testing import HttpReceiver
from servicekit.testing.browser import BrowserPage
from servicekit.testing.conformance import run_cli
from servicekit.testing.service import ServiceUnderTest, flat_error_text
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine
from webhook_hub.app import create_app
from webhook_hub.cli import MIGRATIONS
from webhook_hub.delivery_engine.maintenance import maintain
from webhook_hub.event_types.repository import EventTypeRepository
from webhook_hub.models import Subscription
from webhook_hub.settings import Settings

from tests.factories import Delivering, PortalInBrowser, running_worker
from tests.recording_factories import committed_subscription_of_a_new_owner


@pytest.fixture(scope="session")
def service() -> ServiceUnderTest:
    return ServiceUnderTest(
        command="webhook-hub",
        settings=Settings,
        create_app=create_app,
        migrations=MIGRATIONS,
        api_prefix="/webhooks",
        error_text=flat_error_text,
    )


# --- webhook-hub fixtures -------------------------------------------------------------------


SEEDED_TYPES = [
    {"name": "order.created", "source": "commerce-content", "example_payload": {"id": 1}},
    {"name": "order.paid", "source": "commerce-content", "example_payload": {"id": 1}},
    {"name": "run.completed", "source": "scraper-manager", "example_payload": {"run_id": 1}},
    {"name": "run.failed", "source": "scraper-manager", "example_payload": {"run_id": 1}},
    {"name": "legacy.retired", "source": "commerce-content", "example_payload": {}},
    {
        "name": "inquiry.created",
        "source": "commerce-content",
        "example_payload": {"id": 1},
        "visibility": "personal",
    },
]


@pytest.fixture(autouse=True)
def event_types_seeded(request: pytest.FixtureRequest) -> None:
    """The seeded types, for every test that reaches the database; the others start no server
    (`make test-fast` runs them alone)."""
    if "database_url" in request.fixturenames:
        request.getfixturevalue("seeded_event_types")
        request.getfixturevalue("delivery_log_partitions")


@pytest.fixture(scope="session")
async def seeded_event_types(db_engine: AsyncEngine) -> None:
    async with create_session_factory(db_engine)() as session, session.begin():
        await EventTypeRepository(session).upsert(SEEDED_TYPES)
        connection = await session.connection()
        await connection.execute(
            text("UPDATE event_types SET is_active = false WHERE name = 'legacy.retired'")
        )


@pytest.fixture(scope="session")
async def delivery_log_partitions(db_engine: AsyncEngine, service_settings: Settings) -> None:
    """The partitions a worker's first maintenance round makes (the migration attaches only
    the old tables, up to a few minutes ahead), for tests that write deliveries without one.
    Not autouse: `event_types_seeded` asks for it only for tests that reach the database, so
    the pure ones stay server-free for `make test-fast`."""
    await maintain(db_engine, service_settings.delivery_log_layout, datetime.now(UTC))


@pytest.fixture
def fast_settings(service_settings: Settings) -> Settings:
    """Retries in fractions of a second so failure paths run in test time."""
    return service_settings.model_copy(
        update={
            "retry_schedule_seconds": [0.1, 0.1, 0.1, 0.1, 0.1],
            "retry_jitter": 0.0,
            "delivery_poll_seconds": 0.1,
            "outbox_poll_seconds": 0.1,
        }
    )


@pytest.fixture
async def worker(fast_settings: Settings) -> AsyncIterator[Settings]:
    """The whole worker (relay, dispatch, delivery, mail, NATS service) in this process."""
    async with running_worker(fast_settings) as settings:
        yield settings


@pytest.fixture
async def nats_client(nats_url: str) -> AsyncIterator[NatsClient]:
    client = await nats.connect(nats_url)
    yield client
    await client.close()


@pytest.fixture
def js(nats_client: NatsClient) -> JetStreamContext:
    return nats_client.jetstream()


@pytest.fixture
async def committed_subscription(db_engine: AsyncEngine) -> AsyncIterator[Subscription]:
    """A subscription committed for real (for tests of two transactions), removed after."""
    async with committed_subscription_of_a_new_owner(db_engine) as subscription:
        yield subscription


@pytest.fixture
async def other_owners_subscription(db_engine: AsyncEngine) -> AsyncIterator[Subscription]:
    """Another owner's subscription, committed for real, removed after."""
    async with committed_subscription_of_a_new_owner(db_engine) as subscription:
        yield subscription


@pytest.fixture
def delivering(
    client: httpx.AsyncClient,
    db_engine: AsyncEngine,
    http_receiver: HttpReceiver,
    js: JetStreamContext,
) -> Delivering:
    return Delivering(client, db_engine, http_receiver, js)


@pytest.fixture
def portal(
    browser_page: BrowserPage, hub: httpx.AsyncClient, db_engine: AsyncEngine, screenshot_dir: Path
) -> PortalInBrowser:
    """The portal in a real Chromium, for the modules that have test_portal_browser's `hub`
    (webhook-hub's `serve` and `worker` as processes)."""
    return PortalInBrowser(browser_page, hub, db_engine, screenshot_dir)


@pytest.fixture
def own_database(service_settings: Settings) -> Iterator[Settings]:
    """Settings for a database of this test's own, migrated to head by the real CLI."""
    url = database_url_for(service_settings.database_url, f"mig_{uuid.uuid4().hex[:8]}")
    settings = service_settings.model_copy(update={"database_url": url})
    run_cli("webhook-hub", settings, "migrate", "--create-database")
    try:
        yield settings
    finally:
        drop_database(url)
