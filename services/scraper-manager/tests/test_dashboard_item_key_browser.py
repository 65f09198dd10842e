"""The scraper form's item key and revalidation in Debian's Chromium against `scraper-manager
serve` and `worker` as processes: a key that is not one of the fields refused beside its box
(the service's own check), a good one saved with revalidation off, both shown on the
scraper's page and in the edit form; axe-core at 1280 and 390 px, screenshots."""

from __future__ import annotations

from tests.dashboard import DashboardInBrowser
from tests.test_dashboard_browser import assert_accessible


async def test_the_form_takes_an_item_key_and_revalidation_and_refuses_a_key_at_its_field(
    dashboard: DashboardInBrowser,
) -> None:
    page = dashboard.page
    await dashboard.signed_in("write")
    await page.goto(f"{dashboard.url}/dashboard/scrapers/new")
    assert await page.get_by_label("Revalidate pages").is_checked()  # the API's default
    await page.get_by_label("Name").fill("Keyed")
    await page.get_by_label("Start URL").fill("http://127.0.0.1:9/shop")
    await page.get_by_label("Fields").fill("sku: span.sku::text\nprice: span.price::text")
    await page.get_by_label("Item key (optional)").fill("code")
    await page.get_by_label("Revalidate pages").uncheck()
    await page.get_by_role("button", name="Create scraper").click()
    error = page.locator("#f-item_key-error")
    await error.wait_for()
    assert "not one of the scraper's fields (url, sku, price)" in await error.inner_text()
    assert await page.get_by_label("Item key (optional)").get_attribute("aria-invalid") == "true"
    assert not await page.get_by_label("Revalidate pages").is_checked()  # what was chosen stays
    await assert_accessible(
        dashboard.watched, "dashboard-form-item-key-refused", dashboard.screenshot_dir
    )
    await page.get_by_label("Item key (optional)").fill("sku")
    await page.get_by_role("button", name="Create scraper").click()
    await page.wait_for_url(f"{dashboard.url}/dashboard/scrapers/*")
    facts = " ".join((await page.locator("dl.facts").inner_text()).split())
    assert "Item key sku: each completed run is compared with the last" in facts, facts
    assert "off: every page fetched whole" in facts, facts
    await assert_accessible(
        dashboard.watched, "dashboard-scraper-item-key", dashboard.screenshot_dir
    )
    await page.get_by_role("link", name="Edit").click()
    await page.wait_for_url("**/edit")
    assert await page.get_by_label("Item key (optional)").input_value() == "sku"
    assert not await page.get_by_label("Revalidate pages").is_checked()
    # Cleared in the edit form: the scraper is no longer compared, and revalidates again.
    await page.get_by_label("Item key (optional)").fill("")
    await page.get_by_label("Revalidate pages").check()
    await page.get_by_role("button", name="Save").click()
    await page.wait_for_url(f"{dashboard.url}/dashboard/scrapers/*")
    facts = " ".join((await page.locator("dl.facts").inner_text()).split())
    assert "none: runs are not compared" in facts, facts
    assert "pages revalidated" in facts, facts
