"""The dashboard's "Open the delivery portal" button in Debian's Chromium, across both services
as real processes (`scraper-manager serve` and `worker`, `webhook-hub serve` and `worker`):
a signed-in dashboard user clicks it and comes to webhook-hub's portal for their own owner,
showing their webhook, with no hub key asked; axe-core clean, screenshots."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Iterator

import httpx
import pytest
from scraper_manager.settings import Settings
from servicekit.embedded.network import free_port
from servicekit.testing import HttpReceiver
from servicekit.testing.browser import axe_violations, describe_violations, screenshots

from tests.dashboard import DashboardInBrowser
from tests.factories import Client, make_client
from tests.hub import webhook_hub_worker
from tests.processes import serve_and_worker


@pytest.fixture(scope="module")
def hub_url(postgres_server_url: str, nats_url: str) -> Iterator[str]:
    port = free_port()
    with webhook_hub_worker(postgres_server_url, nats_url, name="hub_portal", serve_port=port):
        yield f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def server(service_settings: Settings, hub_url: str) -> Iterator[str]:
    with serve_and_worker(service_settings) as processes:
        yield processes.url


async def registered_webhook(server: str, who: Client, url: str) -> None:
    """Registered once the hub knows the run event types (scraper-manager publishes them as it
    connects; the hub's worker copies them every 5 s): until then the hub refuses (422)."""
    deadline = time.monotonic() + 30
    async with httpx.AsyncClient(base_url=server) as api:
        while True:
            answer = await api.post(
                "/api/v1/webhooks", json={"url": url, "events": ["run.failed"]}, headers=who.headers
            )
            if answer.status_code == 201 or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.5)
    assert answer.status_code == 201, answer.text


async def test_a_dashboard_user_opens_the_hub_portal_for_their_webhooks_with_one_button(
    dashboard: DashboardInBrowser, hub_url: str, http_receiver: HttpReceiver
) -> None:
    who = await make_client(dashboard.engine, "write")
    await registered_webhook(dashboard.url, who, http_receiver.url)
    page = dashboard.page
    await dashboard.open(who)
    await page.goto(f"{dashboard.url}/dashboard/webhooks")
    for width in (1280, 390):
        await page.set_viewport_size({"width": width, "height": 900})
        violations = await axe_violations(page)
        assert not violations, f"webhooks page at {width}px:\n{describe_violations(violations)}"
    await screenshots(page, dashboard.screenshot_dir, "dashboard-webhooks-portal-button")
    await page.set_viewport_size({"width": 1280, "height": 900})

    await page.get_by_role("button", name="Open the delivery portal").click()
    # The hub's one-time link: its landing page (a preview spends nothing), for our owner.
    await page.wait_for_url(re.compile(re.escape(hub_url) + "/portal/link/"))
    assert who.owner in await page.inner_text("main")
    await page.get_by_role("button", name="Continue to the webhooks portal").click()
    await page.wait_for_url(f"{hub_url}/portal/endpoints")
    main = await page.inner_text("main")
    assert http_receiver.url in main
    assert "API key" not in main  # signed in: no key sign-in form
    await screenshots(page, dashboard.screenshot_dir, "hub-portal-from-dashboard")
    assert dashboard.watched.blocked_requests == []
    assert dashboard.watched.csp_violations == []
    assert dashboard.watched.page_errors == []
