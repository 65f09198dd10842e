"""The portal's main pages, walked in a real Chromium against `serve` and `worker` (the
fixtures of `test_portal_browser`) in the light and the dark scheme at 1280 and 390 px:
axe-clean in each, and saved as the README's screenshots (docs/screenshots/portal-<page>
[-dark]-<width>.png), so a page that looks wrong in either scheme is seen."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from pathlib import Path

import httpx
from servicekit.testing import HttpReceiver
from servicekit.testing.browser import BrowserPage
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.factories import (
    PortalInBrowser,
    both_schemes,
    make_consumer,
    registered_type,
    subscribe,
)
from tests.test_portal_browser import hub, hub_processes
from tests.test_portal_walkthrough import REFUSED, add_deliveries

__all__ = ["hub", "hub_processes"]  # the fixtures, shared with test_portal_browser

DOCS_SCREENSHOTS = Path(__file__).resolve().parents[1] / "docs" / "screenshots"


async def delivered_test_event(engine: AsyncEngine, subscription_id: str) -> uuid.UUID:
    """The creation's test delivery, once the worker has delivered it (its attempt kept)."""
    for _ in range(300):
        async with engine.begin() as connection:
            found = await connection.scalar(
                text(
                    "SELECT id FROM deliveries WHERE subscription_id = :sid"
                    " AND event_type = 'webhook.test' AND status = 'succeeded'"
                ),
                {"sid": subscription_id},
            )
        if found is not None:
            return uuid.UUID(str(found))
        await asyncio.sleep(0.1)
    raise AssertionError("the test event was not delivered")


async def both_schemes_saved(watched: BrowserPage, name: str) -> None:
    """axe-clean at 1280 and 390 px in light, then in dark; each saved for the README."""
    await both_schemes(watched, name, DOCS_SCREENSHOTS)


async def test_the_portals_main_pages_in_light_and_dark_at_1280_and_390_px(
    portal: PortalInBrowser,
    hub: httpx.AsyncClient,
    db_engine: AsyncEngine,
    http_receiver: HttpReceiver,
) -> None:
    page = portal.page
    consumer = await make_consumer(db_engine, "admin")
    paid = await registered_type(
        hub,
        consumer,
        "order.paid",
        "An order was paid",
        {"order_id": 1042, "amount": "19.90", "currency": "EUR"},
    )
    created = await subscribe(
        hub, consumer.headers, f"{http_receiver.url}/orders", [paid], description="Orders"
    )
    sid = str(created["id"])
    delivery_id = await delivered_test_event(db_engine, sid)
    minute = timedelta(minutes=1)
    await add_deliveries(
        db_engine,
        sid,
        *[
            {"status": "succeeded", "age": minute * n, "event_type": paid, "code": 200}
            for n in (3, 20, 45, 70, 130)
        ],
        {
            "status": "failed",
            "age": minute * 90,
            "event_type": paid,
            "attempts": 8,
            "error": REFUSED,
        },
        {"status": "pending", "age": minute * 5, "event_type": paid, "attempts": 2, "code": 503},
    )

    await portal.open(consumer)
    await page.get_by_role("link", name="Orders").first.wait_for()
    await both_schemes_saved(portal.watched, "portal-endpoints")

    await page.goto(f"{hub.base_url}/portal/endpoints/{sid}")
    await page.locator("#chart-hourly canvas").wait_for()
    await both_schemes_saved(portal.watched, "portal-endpoint")

    await page.goto(f"{hub.base_url}/portal/deliveries/{delivery_id}")
    await page.locator("#attempts").get_by_text("HTTP 200").wait_for()
    await both_schemes_saved(portal.watched, "portal-delivery")

    await page.goto(f"{hub.base_url}/portal/event-types?q={paid}")
    await page.get_by_role("heading", name=paid).wait_for()
    await both_schemes_saved(portal.watched, "portal-catalog")

    await page.goto(f"{hub.base_url}/portal/endpoints/new")
    await page.get_by_role("heading", name="Add an endpoint").wait_for()
    await both_schemes_saved(portal.watched, "portal-endpoint-form")
