"""The scraper form's rendering choice in Debian's Chromium against `scraper-manager serve`
and `worker` as processes: "browser" picked in the New scraper form is saved, shown on the
scraper's page and kept in the edit form; axe-core at 1280 and 390 px in light and dark,
screenshots."""

from __future__ import annotations

import httpx

from tests.dashboard import DashboardInBrowser
from tests.test_dashboard_browser import light_and_dark


async def test_browser_rendering_picked_in_the_new_scraper_form_is_saved_and_shown(
    dashboard: DashboardInBrowser,
) -> None:
    page = dashboard.page
    who = await dashboard.signed_in("write")
    await page.goto(f"{dashboard.url}/dashboard/scrapers/new")
    rendering = page.get_by_label("Rendering")
    assert await rendering.input_value() == "http"  # the API's default
    await page.get_by_label("Name").fill("Built by scripts")
    await page.get_by_label("Start URL").fill("http://127.0.0.1:9/app")
    await rendering.select_option("browser")
    await light_and_dark(dashboard.watched, "dashboard-form-render", dashboard.screenshot_dir)
    await page.get_by_role("button", name="Create scraper").click()
    await page.wait_for_url(f"{dashboard.url}/dashboard/scrapers/*")
    shown = " ".join((await page.locator("#config-render").inner_text()).split())
    assert shown == "browser (headless Chromium runs the page's scripts)"
    await light_and_dark(dashboard.watched, "dashboard-scraper-render", dashboard.screenshot_dir)
    scraper_id = page.url.rstrip("/").rsplit("/", 1)[1]
    async with httpx.AsyncClient(base_url=dashboard.url) as api:
        saved = await api.get(f"/api/v1/scrapers/{scraper_id}", headers=who.headers)
    assert saved.json()["render"] == "browser"
    await page.get_by_role("link", name="Edit").click()
    await page.wait_for_url("**/edit")
    assert await page.get_by_label("Rendering").input_value() == "browser"
