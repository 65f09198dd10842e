"""The selector editor (issue 35): the start page fetched once by the crawler, through its
address policy, and the items the selectors extract from it shown as they are typed; in
Debian's Chromium against `serve` and `worker` as processes and a local website, axe-core
at 1280 and 390 px in light and dark; the rules under it as pure code and over sockets."""

from __future__ import annotations

import time

from scraper_manager.dashboard.selector_preview import (
    NoStartPage,
    StartPage,
    extract_preview,
    fetch_start_page,
)
from scraper_manager.models import Scraper
from scraper_manager.settings import Settings

from tests.dashboard import DashboardInBrowser
from tests.factories import make_client, make_scraper
from tests.test_dashboard_browser import light_and_dark
from tests.website import LocalWebsite

PRODUCTS = (
    b"<html><head><title>Shop</title></head><body>"
    b'<div class="product"><h2>Apron</h2><span class="price">9.99</span></div>'
    b'<div class="product"><h2>Mug</h2><span class="price">4.50</span></div>'
    b"</body></html>"
)


def shop_page() -> StartPage:
    return StartPage("http://shop.example/", 200, PRODUCTS, "utf-8", False, time.monotonic())


def test_the_preview_extracts_an_item_per_element_with_its_fields_and_url() -> None:
    got = extract_preview(shop_page(), "div.product", "name: h2::text\nprice: span.price::text")
    assert got.error is None
    assert got.total == 2
    assert got.fields == ["name", "price", "url"]
    assert got.items[0] == {"name": "Apron", "price": "9.99", "url": "http://shop.example/"}


def test_without_selectors_the_preview_is_the_runs_default_item() -> None:
    got = extract_preview(shop_page(), "", "")
    assert got.items == [
        {"url": "http://shop.example/", "status": 200, "title": "Shop", "description": None}
    ]


def test_a_selector_that_is_not_css_nor_xpath_is_told_not_raised() -> None:
    assert (extract_preview(shop_page(), "div[", "name: h2::text").error or "").startswith(
        "Not a CSS or XPath selector"
    )
    assert extract_preview(shop_page(), "", "name: //h2[").error is not None


def test_a_fields_line_without_a_name_is_told_as_the_form_tells_it() -> None:
    assert extract_preview(shop_page(), "", "just h2").error == (
        "Line 1: write each field as name: CSS or XPath"
    )


async def test_the_start_page_is_fetched_by_the_crawler_under_the_address_policy(
    service_settings: Settings, website: LocalWebsite
) -> None:
    scraper = Scraper(owner="o", name="s", url=f"{website.url}/page/0", headers={})
    page = await fetch_start_page(scraper, service_settings)
    assert isinstance(page, StartPage)
    assert page.status == 200
    assert b"Item 0-1" in page.body
    refusing = service_settings.model_copy(update={"allowed_networks": []})
    refused = await fetch_start_page(scraper, refusing)
    assert isinstance(refused, NoStartPage)
    assert refused.reason.startswith("The address policy refused the start page")


async def test_a_start_page_robots_txt_forbids_is_not_fetched(
    service_settings: Settings, website: LocalWebsite
) -> None:
    scraper = Scraper(owner="o", name="s", url=f"{website.url}/private/secret", headers={})
    page = await fetch_start_page(scraper, service_settings)
    assert isinstance(page, NoStartPage)
    assert "robots.txt" in page.reason
    assert all(not path.startswith("/private") for _, path in website.hits)


async def test_the_selector_editor_shows_what_the_selectors_extract_as_they_are_typed(
    dashboard: DashboardInBrowser, website: LocalWebsite
) -> None:
    page = dashboard.page
    who = await make_client(dashboard.engine, "write")
    scraper = await make_scraper(dashboard.engine, who.owner, url=f"{website.url}/page/0")
    await dashboard.open(who)
    await page.goto(f"{dashboard.url}/dashboard/scrapers/{scraper.id}")
    await page.get_by_role("link", name="Try selectors").click()
    preview = page.locator("#selector-preview")
    # No selectors yet: the run's default item, the page's title.
    await preview.get_by_role("cell", name="Page 0", exact=True).wait_for()
    await page.get_by_label("Item selector (optional)").fill("div.product")
    await page.get_by_label("Fields").fill("name: h2::text\nprice: span.price::text")
    await preview.get_by_text("2 items on the page").wait_for()
    rows = page.locator("#preview-items tbody tr")
    assert await rows.nth(1).locator("td").all_inner_texts() == [
        "Item 0-1",
        "1.99",
        f"{website.url}/page/0",
    ]
    await light_and_dark(dashboard.watched, "dashboard-selectors", dashboard.screenshot_dir)
    await page.get_by_label("Item selector (optional)").fill("div[")
    await preview.get_by_text("Not a CSS or XPath selector").wait_for()
    # Typed many times, fetched once: the kept page is read again.
    assert [path for _, path in website.hits if path == "/page/0"] == ["/page/0"]
    await page.get_by_label("Item selector (optional)").fill("div.product")
    await preview.get_by_text("2 items on the page").wait_for()
    await page.get_by_role("button", name="Save selectors").click()
    await page.get_by_text("Selectors saved.").wait_for()
    assert await page.locator("#config-fields").get_by_text("price: span.price::text").count() == 1
