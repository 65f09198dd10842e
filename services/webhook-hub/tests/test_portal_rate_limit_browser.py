"""The subscription page's rate-limit editor in a real Chromium, against webhook-hub's
`serve` and `worker` processes: a refused value shown at its field, a saved limit, and the
deliveries held by it counted on the page; accessible (axe-core) and screenshotted at 1280
and 390 px."""

from __future__ import annotations

from servicekit.testing import HttpReceiver

from tests.factories import PortalInBrowser
from tests.test_portal_browser import hub, hub_processes

__all__ = ["hub", "hub_processes"]  # the fixtures, shared with the portal's browser tests

HELD = 5


async def test_the_rate_limit_editor_refuses_at_the_field_saves_and_shows_what_it_holds(
    portal: PortalInBrowser, http_receiver: HttpReceiver
) -> None:
    page, hub = portal.page, portal.hub
    consumer, created = await portal.endpoint_opened(
        http_receiver.url, description="Warehouse (rate limited)"
    )
    await page.get_by_role("heading", name="Rate limit").wait_for()
    await page.get_by_label("Deliveries per second").fill("0")
    await page.get_by_role("button", name="Save rate limit").click()
    await page.get_by_text("Enter a number of deliveries per second above 0").wait_for()
    assert await page.get_by_label("Deliveries per second").get_attribute("aria-invalid") == "true"
    await portal.assert_clean("portal-rate-limit-errors")

    # One delivery every 20 s: of the test events sent now, all but the first wait.
    await page.get_by_label("Deliveries per second").fill("0.05")
    await page.get_by_label("Burst").fill("1")
    await page.get_by_role("button", name="Save rate limit").click()
    await page.get_by_text("Rate limit saved.").wait_for()
    saved = await hub.get(f"/webhooks/subscriptions/{created['id']}", headers=consumer.headers)
    assert (saved.json()["rate_limit_per_second"], saved.json()["rate_limit_burst"]) == (0.05, 1)
    for _ in range(HELD + 1):
        sent = await hub.post(
            f"/webhooks/subscriptions/{created['id']}/test", headers=consumer.headers
        )
        assert sent.status_code == 202
    await page.reload()
    held = page.locator("#rate-limit-held")
    await held.get_by_text("waiting for the limit").wait_for()
    assert int((await held.locator("strong").inner_text()).replace(",", "")) >= HELD
    await page.get_by_text("0.05 per second, bursts of up to 1").wait_for()
    await portal.assert_clean("portal-rate-limit")
