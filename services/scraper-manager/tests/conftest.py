from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from scraper_manager.app import create_app
from scraper_manager.cli import MIGRATIONS
from scraper_manager.settings import Settings
from servicekit.testing.browser import BrowserPage
from servicekit.testing.service import ServiceUnderTest, flat_error_text
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.dashboard import DashboardInBrowser
from tests.processes import serve_and_worker


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The crawler's own Chromium pool (the `pool` fixture of the browser-render tests) is a
    browser too: those tests need one, so `make test-fast` leaves them to `make test`."""
    for item in items:
        if "pool" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.server)


@pytest.fixture(scope="session")
def service() -> ServiceUnderTest:
    return ServiceUnderTest(
        command="scraper-manager",
        settings=Settings,
        create_app=create_app,
        migrations=MIGRATIONS,
        api_prefix="/api/v1",
        error_text=flat_error_text,
    )


# The crawler's address policy holds in tests too; the local websites and receivers live on
# loopback, which tests allow explicitly (as `make run` does).
LOOPBACK = ["127.0.0.0/8", "::1/128"]


@pytest.fixture(scope="session")
def service_settings(database_url: str, nats_url: str) -> Settings:
    return Settings(
        database_url=database_url,
        nats_url=nats_url,
        log_json=False,
        allowed_networks=LOOPBACK,
        # The hub answers after probing the endpoint; on a loaded 2-core CI box that can take
        # longer than production's 5 s, and a timeout here is not what these tests are about.
        hub_request_timeout_seconds=30,
    )


@pytest.fixture
async def website() -> AsyncIterator[Any]:
    from tests.website import LocalWebsite

    site = LocalWebsite()
    await site.start()
    yield site
    await site.stop()


@pytest.fixture
async def worker(service_settings: Settings) -> AsyncIterator[Settings]:
    """The whole worker (relay, run loop) in this process, with fast heartbeats."""
    import asyncio

    from scraper_manager.worker import run as run_worker

    settings = service_settings.model_copy(
        update={"run_poll_seconds": 0.2, "heartbeat_seconds": 0.2, "outbox_poll_seconds": 0.2}
    )
    stop = asyncio.Event()
    task = asyncio.create_task(run_worker(settings, stop))
    await asyncio.sleep(0.3)
    yield settings
    stop.set()
    await asyncio.wait_for(task, 30)


@pytest.fixture(scope="module")
def server(service_settings: Settings) -> Iterator[str]:
    """`scraper-manager serve` and `worker` as processes, once for a module's tests, on the
    tests' database and NATS, with loopback allowed to the crawler (the local websites) and
    fast worker loops; their URL."""
    fast = service_settings.model_copy(
        update={"run_poll_seconds": 0.2, "heartbeat_seconds": 0.2, "outbox_poll_seconds": 0.2}
    )
    with serve_and_worker(fast) as processes:
        yield processes.url


@pytest.fixture
def dashboard(
    browser_page: BrowserPage, server: str, db_engine: AsyncEngine, screenshot_dir: Path
) -> DashboardInBrowser:
    """The dashboard in a real Chromium against the module's `server` processes."""
    return DashboardInBrowser(browser_page, server, db_engine, screenshot_dir)
