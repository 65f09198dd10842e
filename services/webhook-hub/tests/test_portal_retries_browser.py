"""The retry schedule and timeout editor in a real Chromium against webhook-hub's `serve` and
`worker` processes (test_portal_browser's): accessible (axe-core), within the CSP, and
screenshotted at 1280 and 390 px."""

from __future__ import annotations

from servicekit.testing import HttpReceiver

from tests.factories import PortalInBrowser
from tests.test_portal_browser import hub, hub_processes

__all__ = ["hub", "hub_processes"]  # the fixtures, shared with the portal's browser tests


async def test_the_endpoints_retry_editor_tells_a_bad_wait_at_its_row_then_saves(
    portal: PortalInBrowser, http_receiver: HttpReceiver
) -> None:
    page, hub = portal.page, portal.hub
    consumer, created = await portal.endpoint_opened(http_receiver.url)
    await page.get_by_role("heading", name="Retries and timeout").wait_for()
    await page.locator("#retries-heading").scroll_into_view_if_needed()
    await portal.assert_clean("portal-retries-in-effect")

    await page.get_by_role("radio", name="Set these waits").check()
    await page.get_by_label("Retry 1 after").fill("30s")
    await page.get_by_label("Retry 2 after").fill("5x")
    await page.get_by_label("Retry 3 after").fill("2h")
    await page.get_by_label("Timeout (seconds)").fill("45")
    await page.get_by_role("button", name="Save retries and timeout").click()
    await page.get_by_text("'5x' is not a duration").wait_for()
    await page.get_by_text("Input should be less than or equal to 30").wait_for()
    assert await page.get_by_label("Retry 2 after").get_attribute("aria-invalid") == "true"
    await portal.assert_clean("portal-retries-errors")

    await page.get_by_label("Retry 2 after").fill("5m")
    await page.get_by_label("Timeout (seconds)").fill("15")
    await page.get_by_role("button", name="Save retries and timeout").click()
    await page.get_by_text("Retries and timeout saved.").wait_for()
    await page.locator("#retries-in-effect").get_by_text("set on this endpoint").first.wait_for()
    saved = await hub.get(f"/webhooks/subscriptions/{created['id']}", headers=consumer.headers)
    assert saved.json()["retry_schedule"] == ["30s", "5m", "2h"]
    assert saved.json()["timeout_seconds"] == 15
    await page.locator("#retries-heading").scroll_into_view_if_needed()
    await portal.assert_clean("portal-retries-saved")


async def test_the_defaults_page_edits_the_owners_defaults(
    portal: PortalInBrowser,
) -> None:
    page, hub = portal.page, portal.hub
    consumer = await portal.signed_in("write")
    await page.get_by_role("link", name="Delivery defaults").click()
    await page.get_by_role("heading", name="Delivery defaults").wait_for()
    await page.get_by_role("radio", name="Set these waits").check()
    await page.get_by_label("Retry 1 after").fill("1m")
    await page.get_by_label("Retry 2 after").fill("1h")
    await page.get_by_label("Retry 3 after").fill("1d")
    await page.get_by_label("Timeout (seconds)").fill("20")
    await page.get_by_role("button", name="Save retries and timeout").click()
    await page.get_by_text("Defaults saved.").wait_for()
    defaults = await hub.get("/webhooks/consumers/me/defaults", headers=consumer.headers)
    assert (defaults.json()["retry_schedule"], defaults.json()["timeout_seconds"]) == (
        ["1m", "1h", "1d"],
        20,
    )
    await portal.assert_clean("portal-delivery-defaults")
