"""The portal in a real Chromium against webhook-hub's `serve` and `worker` running as real
processes, the network limited to 127.0.0.1: accessible (axe-core, no serious or critical
violation), within the CSP, and screenshotted at 1280 and 390 px."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from servicekit.embedded.network import free_port
from servicekit.testing import HttpReceiver
from servicekit.testing.browser import screenshots
from servicekit.web.pages.csrf import CSRF_HEADER
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine
from webhook_hub.settings import Settings

from tests.factories import (
    PortalInBrowser,
    link_for,
    make_consumer,
    only_test_delivery_settled,
    set_deliveries,
    subscribe,
)


def start(command: str, settings: Settings, port: int) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "WEBHOOK_HUB_DATABASE_URL": settings.database_url,
        "WEBHOOK_HUB_NATS_URL": settings.nats_url,
        "WEBHOOK_HUB_PORT": str(port),
        "WEBHOOK_HUB_RETRY_SCHEDULE_SECONDS": "[0.5, 0.5]",
        "WEBHOOK_HUB_DELIVERY_POLL_SECONDS": "0.2",
        "WEBHOOK_HUB_LOG_LEVEL": "WARNING",
    }
    executable = str(Path(sys.executable).parent / "webhook-hub")
    return subprocess.Popen([executable, command], env=env, stdout=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def hub_processes(service_settings: Settings) -> Iterator[str]:
    port = free_port()
    processes = [start("serve", service_settings, port), start("worker", service_settings, port)]
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            assert processes[0].poll() is None, "webhook-hub serve exited"
            time.sleep(0.1)
        yield url
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(30)


@pytest.fixture
async def hub(hub_processes: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=hub_processes) as client:
        yield client


async def test_a_portal_link_opens_the_consumers_view_once(
    portal: PortalInBrowser,
    hub: httpx.AsyncClient,
    db_engine: AsyncEngine,
) -> None:
    page = portal.page
    consumer = await make_consumer(db_engine, "write")
    link = await link_for(hub, consumer)
    await page.goto(link)
    await page.get_by_text(consumer.owner).first.wait_for()
    await portal.assert_clean("portal-link")
    await page.get_by_role("button", name="Continue to the webhooks portal").click()
    await page.get_by_role("heading", name="Endpoints").wait_for()
    assert await page.locator(".who").get_by_text(consumer.owner).is_visible()
    await portal.assert_clean("portal-endpoints-empty")
    response = await page.goto(link)
    assert response is not None
    assert response.status == 410
    await page.get_by_text("already used").wait_for()
    await portal.assert_clean("portal-link-used")
    expired = await link_for(hub, consumer)
    async with db_engine.begin() as connection:
        await connection.execute(
            text(
                "UPDATE portal_links SET expires_at = now() - interval '1 s'"
                " WHERE owner = :owner AND used_at IS NULL"
            ),
            {"owner": consumer.owner},
        )
    response = await page.goto(expired)
    assert response is not None
    assert response.status == 410
    await page.get_by_text("expired").first.wait_for()
    await portal.assert_clean("portal-link-expired")


async def test_the_login_page_signs_in_with_an_api_key(
    portal: PortalInBrowser,
    hub: httpx.AsyncClient,
    db_engine: AsyncEngine,
) -> None:
    page = portal.page
    consumer = await make_consumer(db_engine, "read")
    await page.goto(f"{hub.base_url}/portal/endpoints")
    await portal.assert_clean("portal-login")
    await page.get_by_label("API key").fill(consumer.key)
    await page.get_by_role("button", name="Sign in").click()
    await page.get_by_role("heading", name="Endpoints").wait_for()
    assert await page.locator(".who .badge").text_content() == "read"


async def test_keyboard_only_creation_shows_the_probe_result_and_the_secret(
    portal: PortalInBrowser,
    hub: httpx.AsyncClient,
    db_engine: AsyncEngine,
    http_receiver: HttpReceiver,
) -> None:
    page = portal.page
    await portal.open(await make_consumer(db_engine, "write"))
    await page.goto(f"{hub.base_url}/portal/endpoints/new")
    await portal.assert_clean("portal-new-endpoint")
    await page.get_by_label("Endpoint URL").focus()
    await page.keyboard.type(http_receiver.url)
    await page.keyboard.press("Tab")  # the catalog link in the picker's hint
    await page.keyboard.press("Tab")  # `*`
    await page.keyboard.press("Tab")  # the first type
    while await page.evaluate("document.activeElement.value") != "order.paid":
        await page.keyboard.press("Tab")
    await page.keyboard.press("Space")
    await page.get_by_label("Description").focus()
    await page.keyboard.type("Orders for the warehouse")
    await page.keyboard.press("Enter")
    await page.get_by_role("heading", name="Endpoint created").wait_for()
    await page.get_by_text("answered our check with HTTP 200").wait_for()
    secret = await page.get_by_label("Signing secret").input_value()
    assert len(secret) == 32
    await portal.assert_clean("portal-created")


async def test_field_errors_are_shown_at_the_fields_in_the_browser(
    portal: PortalInBrowser,
    hub: httpx.AsyncClient,
    db_engine: AsyncEngine,
) -> None:
    page = portal.page
    await portal.open(await make_consumer(db_engine, "write"))
    await page.goto(f"{hub.base_url}/portal/endpoints/new")
    # (The timeout moved to the endpoint's "Retries and timeout" editor: the URL is the
    # field checked here.)
    await page.get_by_label("Endpoint URL").fill("ftp://example.invalid/hooks")
    await page.get_by_role("button", name="Create endpoint").click()
    await page.get_by_text("Pick at least one event type.").wait_for()
    assert await page.get_by_label("Endpoint URL").get_attribute("aria-invalid") == "true"
    await portal.assert_clean("portal-new-endpoint-errors")


async def test_a_delivery_appears_in_the_open_log_and_is_retried_from_its_page(
    portal: PortalInBrowser,
    hub: httpx.AsyncClient,
    db_engine: AsyncEngine,
    http_receiver: HttpReceiver,
) -> None:
    page = portal.page
    consumer = await make_consumer(db_engine, "write")
    created = await subscribe(hub, consumer.headers, http_receiver.url, description="Live")
    await portal.open_endpoint(consumer, created["id"])
    rows = await portal.log_rows()
    count = await rows.count()
    sent = await hub.post(f"/webhooks/subscriptions/{created['id']}/test", headers=consumer.headers)
    assert sent.status_code == 202
    for _ in range(100):  # no reload: the SSE stream brings the row
        if await rows.count() == count + 1:
            break
        await asyncio.sleep(0.1)
    assert await rows.count() == count + 1
    await page.locator("#deliveries").get_by_text("succeeded").first.wait_for()
    await portal.assert_clean("portal-endpoint")

    await rows.first.get_by_role("link").click()
    await page.locator("#attempts tr").first.wait_for()
    received = len(http_receiver.requests)
    await page.get_by_role("button", name="Retry now").click()
    await page.get_by_text("Retry queued").wait_for()
    for _ in range(100):
        if len(http_receiver.requests) > received:
            break
        await asyncio.sleep(0.1)
    assert len(http_receiver.requests) > received
    for _ in range(50):  # the attempt is written just after the receiver answered
        await page.reload()
        if await page.locator("#attempts tr").count() >= 2:
            break
        await asyncio.sleep(0.1)
    assert await page.locator("#attempts tr").count() >= 2
    await portal.assert_clean("portal-delivery")


async def test_rotating_shows_the_new_secret_with_a_copy_button(
    portal: PortalInBrowser,
    hub: httpx.AsyncClient,
    db_engine: AsyncEngine,
    http_receiver: HttpReceiver,
) -> None:
    page = portal.page
    await page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    consumer = await make_consumer(db_engine, "write")
    created = await subscribe(hub, consumer.headers, http_receiver.url)
    await portal.open_endpoint(consumer, created["id"])
    page.on("dialog", lambda dialog: asyncio.ensure_future(dialog.accept()))
    await page.get_by_role("button", name="Rotate secret").click()
    await page.get_by_role("heading", name="New signing secret").wait_for()
    secret = await page.get_by_label("Signing secret").input_value()
    assert secret != created["secret"]
    await page.get_by_text("The previous secret keeps working until").wait_for()
    await page.get_by_role("button", name="Copy secret").click()
    await page.get_by_text("Copied to the clipboard.").wait_for()
    assert await page.evaluate("navigator.clipboard.readText()") == secret
    await portal.assert_clean("portal-rotated")


async def test_a_read_session_has_no_working_write_control(
    portal: PortalInBrowser,
    hub: httpx.AsyncClient,
    db_engine: AsyncEngine,
    http_receiver: HttpReceiver,
) -> None:
    page = portal.page
    writer = await make_consumer(db_engine, "write")
    created = await subscribe(hub, writer.headers, http_receiver.url)
    await portal.open_endpoint(
        await make_consumer(db_engine, "read", owner=writer.owner), created["id"]
    )
    assert await page.locator("main form[method=post] button").count() == 0
    assert await page.get_by_role("link", name="Add an endpoint").count() == 0
    await page.get_by_text("You have read access").wait_for()
    await portal.assert_clean("portal-endpoint-read")
    # The session's real CSRF token (htmx's header on <body>): the refusal is the level's.
    hx_headers = await page.locator("body").get_attribute("hx-headers")
    token = json.loads(hx_headers or "{}")[CSRF_HEADER]
    forged = await page.request.post(
        f"{hub.base_url}/portal/endpoints/{created['id']}/rotate-secret",
        form={"csrf_token": token},
    )
    assert forged.status == 403
    assert "access level" in await forged.text()
    rotated = await hub.get(f"/webhooks/subscriptions/{created['id']}", headers=writer.headers)
    assert rotated.json()["secret_rotated_at"] is None


async def test_another_consumers_ids_are_404_and_a_post_without_csrf_is_refused(
    portal: PortalInBrowser,
    hub: httpx.AsyncClient,
    db_engine: AsyncEngine,
    http_receiver: HttpReceiver,
) -> None:
    page = portal.page
    owner_b = await make_consumer(db_engine, "write")
    theirs = await subscribe(hub, owner_b.headers, http_receiver.url)
    deliveries = await hub.get(
        f"/webhooks/subscriptions/{theirs['id']}/deliveries", headers=owner_b.headers
    )
    their_delivery = deliveries.json()["data"][0]["id"]
    owner_a = await make_consumer(db_engine, "write")
    mine = await subscribe(hub, owner_a.headers, http_receiver.url)
    await portal.open(owner_a)
    for path in (f"/portal/endpoints/{theirs['id']}", f"/portal/deliveries/{their_delivery}"):
        response = await page.goto(f"{hub.base_url}{path}")
        assert response is not None
        assert response.status == 404
    await portal.assert_clean("portal-not-found")
    without_token = await page.request.post(f"{hub.base_url}/portal/endpoints/{mine['id']}/test")
    assert without_token.status == 403


async def test_the_event_catalog_is_accessible(
    portal: PortalInBrowser,
    hub: httpx.AsyncClient,
    db_engine: AsyncEngine,
) -> None:
    page = portal.page
    await portal.open(await make_consumer(db_engine, "write"))
    await page.get_by_role("link", name="Event catalog").click()
    await page.locator("#type-order\\.paid").wait_for()
    await portal.assert_clean("portal-event-types")


async def test_editing_through_the_form_shows_the_error_at_the_field_then_saves(
    portal: PortalInBrowser,
    hub: httpx.AsyncClient,
    db_engine: AsyncEngine,
    http_receiver: HttpReceiver,
) -> None:
    page = portal.page
    consumer = await make_consumer(db_engine, "write")
    created = await subscribe(hub, consumer.headers, http_receiver.url)
    await portal.open_endpoint(consumer, created["id"])
    await page.get_by_role("link", name="Edit endpoint").click()
    await page.get_by_role("heading", name="Edit endpoint").wait_for()
    await page.get_by_role("checkbox", name="order.paid").uncheck()
    await page.get_by_role("button", name="Save changes").click()
    await page.get_by_text("Pick at least one event type.").wait_for()
    await portal.assert_clean("portal-edit-errors")
    await page.get_by_role("checkbox", name="order.created").check()
    await page.get_by_label("Header 1 name").fill("X-Team")
    await page.get_by_label("Header 1 value").fill("warehouse")
    await page.get_by_role("button", name="Save changes").click()
    await page.get_by_text("Endpoint saved.").wait_for()
    saved = await hub.get(f"/webhooks/subscriptions/{created['id']}", headers=consumer.headers)
    assert saved.json()["events"] == ["order.created"]
    assert saved.json()["headers"] == {"X-Team": "warehouse"}


async def test_recover_failed_since_a_picked_moment_redelivers(
    portal: PortalInBrowser,
    hub: httpx.AsyncClient,
    db_engine: AsyncEngine,
    http_receiver: HttpReceiver,
) -> None:
    page = portal.page
    consumer = await make_consumer(db_engine, "write")
    created = await subscribe(hub, consumer.headers, http_receiver.url)
    await only_test_delivery_settled(db_engine, created["id"])
    await set_deliveries(db_engine, created["id"], [("failed", timedelta(hours=1))])
    await portal.open_endpoint(consumer, created["id"])
    received = len([r for r in http_receiver.requests if r.method == "POST"])
    since = (datetime.now(UTC) - timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M")
    await page.get_by_label("Created since (UTC)").fill(since)
    await page.get_by_role("button", name="Recover failed deliveries").click()
    await page.get_by_text("Queued now: 1 delivery that failed").wait_for()
    for _ in range(100):  # the worker sends it again, to the real receiver
        if len([r for r in http_receiver.requests if r.method == "POST"]) > received:
            break
        await asyncio.sleep(0.1)
    assert len([r for r in http_receiver.requests if r.method == "POST"]) > received


async def test_the_endpoint_page_draws_its_charts_in_light_and_dark(
    portal: PortalInBrowser,
    hub: httpx.AsyncClient,
    db_engine: AsyncEngine,
    http_receiver: HttpReceiver,
) -> None:
    page = portal.page
    consumer = await make_consumer(db_engine, "write")
    created = await subscribe(hub, consumer.headers, http_receiver.url, description="Orders")
    await subscribe(hub, consumer.headers, f"{http_receiver.url}/audit", ["*"])
    await only_test_delivery_settled(db_engine, created["id"])
    hour = timedelta(hours=1)
    rows = [("succeeded", hour * (n % 30) + timedelta(minutes=n)) for n in range(120)]
    rows += [("failed", hour * (n * 5 % 26)) for n in range(14)] + [("pending", timedelta(0))]
    rows += [("succeeded", timedelta(days=d, hours=2)) for d in range(1, 7) for _ in range(d * 6)]
    await set_deliveries(db_engine, created["id"], rows)
    async with db_engine.begin() as connection:
        await connection.execute(
            text(
                "INSERT INTO delivery_attempts (delivery_id, attempted_at, status_code, duration_ms)"
                " SELECT id, created_at, 200, 40 + (abs(hashtext(id::text)) % 400)"
                " FROM deliveries WHERE subscription_id = :sid"
            ),
            {"sid": created["id"]},
        )
    await portal.open(consumer)
    await page.locator("td[data-label='Last 24 h']").first.wait_for()
    await portal.assert_clean("portal-endpoints")
    await page.goto(f"{hub.base_url}/portal/endpoints/{created['id']}")
    for chart in ("chart-hourly", "chart-daily", "chart-latency"):
        await page.locator(f"#{chart} canvas").wait_for()
    assert await page.locator(".chart canvas").count() == 3
    await portal.assert_clean("portal-endpoint-charts")
    await page.emulate_media(color_scheme="dark")
    await page.locator("#chart-hourly canvas").wait_for()
    await portal.assert_clean("portal-endpoint-charts-dark")
    await page.emulate_media(color_scheme="light")


async def test_the_api_docs_render_offline_from_the_running_service(
    portal: PortalInBrowser,
    hub: httpx.AsyncClient,
) -> None:
    page = portal.page
    await page.goto(f"{hub.base_url}/docs")
    await page.locator(".swagger-ui .information-container").wait_for()
    await page.get_by_text("webhook-hub").first.wait_for()
    await page.goto(f"{hub.base_url}/redoc")
    await page.locator(".api-content h1", has_text="webhook-hub").wait_for()
    await screenshots(page, portal.screenshot_dir, "hub-redoc")
    assert portal.watched.blocked_requests == []
    # ReDoc hard-codes its footer logo from its CDN: the CSP stops it before any request.
    assert [v for v in portal.watched.csp_violations if "redoc.ly" not in v] == []
