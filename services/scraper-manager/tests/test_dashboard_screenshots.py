"""The dashboard's main pages, walked in Debian's Chromium against `serve` and `worker` as
processes, in the light and the dark scheme at 1280 and 390 px: axe-core clean in each, and
saved as the README's screenshots (docs/screenshots/<page>[-dark]-<width>.png), so a page
that looks wrong in either scheme is seen."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Literal

from servicekit.testing.browser import (
    BrowserPage,
    axe_violations,
    describe_violations,
    screenshots,
)
from sqlalchemy import text

from tests.dashboard import DashboardInBrowser
from tests.factories import make_client, make_run, make_scraper
from tests.test_dashboard_run_compare import _shape

DOCS_SCREENSHOTS = Path(__file__).resolve().parents[1] / "docs" / "screenshots"


async def both_schemes_saved(watched: BrowserPage, name: str) -> None:
    """axe-clean at 1280 and 390 px in light, then in dark; each saved for the README."""
    schemes: tuple[tuple[Literal["light", "dark"], str], ...] = (("light", ""), ("dark", "-dark"))
    for scheme, suffix in schemes:
        await watched.page.emulate_media(color_scheme=scheme)
        for width in (1280, 390):
            await watched.page.set_viewport_size({"width": width, "height": 900})
            violations = await axe_violations(watched.page)
            assert not violations, f"{name} {scheme} {width}px:\n{describe_violations(violations)}"
        await screenshots(watched.page, DOCS_SCREENSHOTS, f"{name}{suffix}")
    await watched.page.emulate_media(color_scheme="light")
    await watched.page.set_viewport_size({"width": 1280, "height": 900})
    assert watched.blocked_requests == []
    assert watched.csp_violations == []
    assert watched.page_errors == []


async def test_the_dashboards_main_pages_in_light_and_dark_at_1280_and_390_px(
    dashboard: DashboardInBrowser,
) -> None:
    page = dashboard.page
    who = await make_client(dashboard.engine, "admin")
    scraper = await make_scraper(
        dashboard.engine,
        who.owner,
        name="Catalog",
        url="http://127.0.0.1:9/catalog",
        schedule="0 6 * * 1-5",
        item_selector="div.product",
        selectors={"name": "h2::text", "price": "span.price::text"},
        item_key="name",
    )
    start = datetime.now(UTC) - timedelta(hours=3)
    earlier = await make_run(dashboard.engine, scraper, items=8)
    latest = await make_run(dashboard.engine, scraper, items=12)
    await _shape(
        dashboard.engine,
        earlier.id,
        pages_fetched=10,
        status_counts={"200": 9, "404": 1},
        started_at=start,
        finished_at=start + timedelta(seconds=41),
    )
    await _shape(
        dashboard.engine,
        latest.id,
        pages_fetched=14,
        status_counts={"200": 12, "301": 1, "500": 1},
        started_at=start + timedelta(hours=2),
        finished_at=start + timedelta(hours=2, seconds=37),
    )
    async with dashboard.engine.begin() as connection:
        # Items as the scraper's selectors would make them.
        await connection.execute(
            text(
                "UPDATE items SET data = jsonb_build_object('name', 'Linen apron ' ||"
                " (data->>'n'), 'price', (10 + (data->>'n')::int) || '.90')"
                " WHERE run_id IN (:a, :b)"
            ),
            {"a": earlier.id, "b": latest.id},
        )
        item_id = await connection.scalar(
            text("SELECT min(id) FROM items WHERE run_id = :run"), {"run": latest.id}
        )
    base = f"{dashboard.url}/dashboard"
    await dashboard.open(who)
    await page.get_by_role("link", name="Catalog").first.wait_for()
    await both_schemes_saved(dashboard.watched, "scrapers")

    await page.goto(f"{base}/scrapers/{scraper.id}")
    await page.locator("#config-fields").wait_for()
    await both_schemes_saved(dashboard.watched, "scraper")

    await page.goto(f"{base}/scrapers/{scraper.id}/runs/{latest.id}")
    await page.get_by_role("heading", name=f"Run #{latest.number}").first.wait_for()
    await both_schemes_saved(dashboard.watched, "run")

    await page.goto(f"{base}/scrapers/{scraper.id}/runs/{latest.id}/items")
    await page.locator("table").first.wait_for()
    await both_schemes_saved(dashboard.watched, "items")

    await page.goto(f"{base}/scrapers/{scraper.id}/runs/{latest.id}/items/{item_id}")
    await page.locator("#item-url").wait_for()
    await both_schemes_saved(dashboard.watched, "item")

    await page.goto(f"{base}/scrapers/new")
    await page.get_by_label("Name").wait_for()
    await both_schemes_saved(dashboard.watched, "form")
