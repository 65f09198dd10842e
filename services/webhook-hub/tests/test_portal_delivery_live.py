"""A delivery's page follows its retries live (issue 35, what Svix's and Hookdeck's consoles
do): in a real Chromium against `serve` and `worker` (the fixtures of `test_portal_browser`),
the receiver fails an attempt, then answers the retry, and the open page shows that attempt
without a reload; axe-clean at 1280 and 390 px in light and dark."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest
from aiohttp import web
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.factories import PortalInBrowser, make_consumer, subscribe
from tests.test_portal_browser import hub, hub_processes

__all__ = ["hub", "hub_processes"]  # the fixtures, shared with test_portal_browser


class FailThenHoldReceiver:
    """Answers the first delivery request 500; holds the second (the retry) until
    `release()`, then answers it 200. Where a test must act while a retry is in flight, with no clock."""

    def __init__(self) -> None:
        self.retry_arrived = asyncio.Event()
        self._released = asyncio.Event()
        self._seen = 0
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def _handle(self, request: web.Request) -> web.Response:
        await request.read()
        if "webhook-id" not in request.headers:
            return web.Response(status=200)  # the endpoint's probe, not a delivery
        self._seen += 1
        if self._seen == 1:
            return web.Response(status=500, text="database is down")
        self.retry_arrived.set()
        await self._released.wait()
        return web.Response(status=200, text="ok")

    def release(self) -> None:
        self._released.set()

    async def start(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}"

    async def stop(self) -> None:
        self.release()
        if self._runner is not None:
            await self._runner.cleanup()


@pytest.fixture
async def fail_then_hold() -> AsyncIterator[FailThenHoldReceiver]:
    receiver = FailThenHoldReceiver()
    await receiver.start()
    try:
        yield receiver
    finally:
        await receiver.stop()


async def test_a_deliverys_page_shows_the_retrys_attempt_as_it_is_made_without_a_reload(
    portal: PortalInBrowser,
    hub: httpx.AsyncClient,
    db_engine: AsyncEngine,
    fail_then_hold: FailThenHoldReceiver,
) -> None:
    page = portal.page
    consumer = await make_consumer(db_engine, "write")
    # The creation's test event is the delivery followed: its first attempt gets 500, its
    # retry is held at the receiver while the page is open.
    created = await subscribe(
        hub, consumer.headers, f"{fail_then_hold.url}/hooks", timeout_seconds=30
    )
    await asyncio.wait_for(fail_then_hold.retry_arrived.wait(), 30)
    async with db_engine.begin() as connection:
        delivery_id = await connection.scalar(
            text("SELECT id FROM deliveries WHERE subscription_id = :sid"), {"sid": created["id"]}
        )
    await portal.open(consumer)
    await page.goto(f"{hub.base_url}/portal/deliveries/{delivery_id}")
    await page.evaluate("window.sameDocument = true")
    # The failed attempt, as the page loaded or as soon as the worker has recorded it.
    attempts = page.locator("#attempts tr")
    await attempts.first.get_by_text("HTTP 500").wait_for()
    assert await attempts.count() == 1
    assert await page.locator("#delivery-status").get_by_text("retrying").is_visible()

    fail_then_hold.release()

    await page.locator("#delivery-status").get_by_text("succeeded").wait_for()
    assert await attempts.count() == 2
    assert await attempts.nth(1).get_by_text("HTTP 200").is_visible()
    assert await page.get_by_text("Attempt 2,").is_visible()  # its request as sent, too
    assert await page.evaluate("window.sameDocument === true")  # no reload
    await portal.both_schemes("portal-delivery-live")
