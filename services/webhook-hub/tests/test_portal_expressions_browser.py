"""The portal's CEL editor in a real Chromium (webhook-hub's `serve` and `worker` as real
processes): the preview runs the expressions on the chosen type's example payload and shows
the result or the error with its position, and saving refuses what the API refuses.
Accessible (axe-core), within the CSP, screenshotted at 1280 and 390 px."""

from __future__ import annotations

from servicekit.testing import HttpReceiver

from tests.factories import PortalInBrowser
from tests.test_portal_browser import hub, hub_processes

__all__ = ["hub", "hub_processes"]  # the fixtures, shared with the portal's other browser tests


async def test_the_cel_editor_previews_on_an_example_and_saves_what_compiles(
    portal: PortalInBrowser, http_receiver: HttpReceiver
) -> None:
    page, hub = portal.page, portal.hub
    consumer, created = await portal.endpoint_opened(http_receiver.url, ["order.paid"])
    await page.get_by_role("link", name="Edit filter and transform").click()
    await page.get_by_role("heading", name="Filter and transform").wait_for()

    await page.get_by_role("textbox", name="Filter", exact=True).fill(
        'event.type == "order.paid" && event.data.id > 0'
    )
    await page.get_by_role("textbox", name="Transform", exact=True).fill(
        '{"order": event.data.id, "kind": event.type}'
    )
    await page.get_by_role("button", name="Preview").click()
    body = page.locator("#preview-body")
    await body.wait_for()
    assert '"order": 1' in await body.inner_text()
    assert "true: this event is delivered" in await page.locator("#preview-filter").inner_text()
    await portal.assert_clean("portal-cel-editor-preview")

    await page.get_by_role("textbox", name="Filter", exact=True).fill("event.data.id >")
    await page.get_by_role("button", name="Preview").click()
    await page.locator("#preview-filter").get_by_text("Line 1, column 16").wait_for()
    await page.get_by_role("button", name="Save").click()
    await page.locator("#f-filter-error").get_by_text("Line 1, column 16").wait_for()
    assert (
        await page.get_by_role("textbox", name="Filter", exact=True).get_attribute("aria-invalid")
        == "true"
    )
    await portal.assert_clean("portal-cel-editor-error")

    await page.get_by_role("textbox", name="Filter", exact=True).fill("event.data.id > 5")
    await page.get_by_label("Or paste the event's data (JSON)").fill('{"id": 7}')
    await page.get_by_role("button", name="Preview").click()
    await page.locator("#preview-body").get_by_text('"order": 7').wait_for()
    await page.get_by_role("button", name="Save").click()
    await page.get_by_text("Filter and transform saved.").wait_for()
    await page.locator("dd").get_by_text("event.data.id > 5").wait_for()
    await portal.assert_clean("portal-endpoint-expressions")
    saved = await hub.get(f"/webhooks/subscriptions/{created['id']}", headers=consumer.headers)
    assert saved.json()["filter"] == "event.data.id > 5"
    assert saved.json()["transform"] == '{"order": event.data.id, "kind": event.type}'
