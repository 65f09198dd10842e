"""The run page's changes in Debian's Chromium against `scraper-manager serve` and `worker` as
processes and a shop on loopback: after a second run, the diff (added, removed, changed with
old → new per field), the kind filter, the pages not modified, the changes' download; axe-core
at 1280 and 390 px, screenshots."""

from __future__ import annotations

import asyncio
import csv
import io
from pathlib import Path

import httpx

from tests.catalog import Catalog
from tests.dashboard import DashboardInBrowser
from tests.factories import make_client
from tests.test_changes import SHOP
from tests.test_dashboard_browser import assert_accessible, run_ends


async def test_a_runs_changes_show_as_a_diff_with_a_filter_and_a_download(
    dashboard: DashboardInBrowser,
) -> None:
    page = dashboard.page
    shop = Catalog(pages={0: {"A": "1.00", "B": "2.00"}, 1: {"C": "3.00"}})
    await shop.start()
    try:
        who = await make_client(dashboard.engine, "write")
        async with httpx.AsyncClient(base_url=dashboard.url) as api:
            made = await api.post(
                "/api/v1/scrapers",
                json={"name": "shop", "url": shop.url, **SHOP},
                headers=who.headers,
            )
            scraper_id = made.json()["id"]
            for _ in range(2):
                run_id = (
                    await api.post(f"/api/v1/scrapers/{scraper_id}/run", headers=who.headers)
                ).json()["run_id"]
                await run_ends(api, who, scraper_id, run_id)
                shop.pages[0] = {"A": "1.50", "D": "4.00"}
    finally:
        await shop.stop()
    await dashboard.open(who)
    await page.goto(f"{dashboard.url}/dashboard/scrapers/{scraper_id}/runs/{run_id}")
    await page.locator("#run-status", has_text="completed").wait_for(timeout=20_000)
    counts = await page.locator("#changes-counts").inner_text()
    assert "1 added, 1 removed, 1 changed" in " ".join(counts.split())
    rows = page.locator("#changes-table tbody tr")
    assert await rows.count() == 3
    changed = page.locator("#changes-table tr.change-changed")
    assert await changed.locator("del").inner_text() == "1.00"
    assert await changed.locator("ins").inner_text() == "1.50"
    assert await changed.locator("dt").all_inner_texts() == ["price"]
    added = await page.locator("#changes-table tr.change-added ins").all_inner_texts()
    assert sorted(added) == sorted([shop.url, "D", "4.00"])
    # /shop/1 did not change: answered 304, its item reused.
    assert (await page.locator("#run-not-modified").inner_text()).strip() == "1"
    await assert_accessible(dashboard.watched, "dashboard-run-changes", dashboard.screenshot_dir)
    async with page.expect_download() as download:
        await page.get_by_role("link", name="Changes as CSV").click()
    text = await asyncio.to_thread(Path(await (await download.value).path()).read_text)
    assert [r["change_key"] for r in csv.DictReader(io.StringIO(text))] == ["A", "B", "D"]
    await page.get_by_role("link", name="changed", exact=True).click()
    await page.wait_for_url("**kind=changed**")
    assert await rows.count() == 1
    await assert_accessible(
        dashboard.watched, "dashboard-run-changes-changed", dashboard.screenshot_dir
    )
