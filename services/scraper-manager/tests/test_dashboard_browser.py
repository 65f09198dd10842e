"""The dashboard in Debian's Chromium against `scraper-manager serve` and `scraper-manager
worker` running as processes, and a local website:
a scraper made with the keyboard alone (a bad cron shown at the field, then the next firings),
a run watched live without reload, a second run refused, a stop within 5 s, the downloads;
axe-core at 1280 and 390 px, screenshots."""

from __future__ import annotations

import asyncio
import csv
import io
import json
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx
from openpyxl import load_workbook
from playwright.async_api import Page
from scraper_manager.models import Item, LogLevel, Run, RunLogLine
from servicekit.db.engine import create_session_factory
from servicekit.testing.browser import (
    BrowserPage,
    axe_violations,
    describe_violations,
    screenshots,
)

from tests.dashboard import DashboardInBrowser
from tests.factories import Client, make_client, make_run, make_scraper
from tests.website import LocalWebsite


def number(text: str) -> float | None:
    """The figure a cell shows ("12", "3.4 s"); None while it shows none ("measuring…")."""
    first = text.strip().split(" ")[0]
    try:
        return float(first)
    except ValueError:
        return None


async def figure(page: Page, selector: str) -> float:
    shown = number(await page.locator(selector).inner_text())
    assert shown is not None, f"{selector} shows no figure"
    return shown


async def figure_reaches(page: Page, selector: str, least: float, timeout: float = 15.0) -> None:
    """Polled from here: the page's CSP forbids the eval that wait_for_function would need."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        shown = number(await page.locator(selector).inner_text())
        if shown is not None and shown >= least:
            return
        await asyncio.sleep(0.2)
    figures = await page.locator("#figures td").all_inner_texts()
    raise AssertionError(f"{selector} never reached {least}; the figures: {figures}")


async def lines_exceed(page: Page, count: int, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await page.locator("#log-tail li").count() > count:
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"the log tail never grew past {count} lines")


async def run_ends(api: httpx.AsyncClient, who: Client, scraper_id: int, run_id: int) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        run = await api.get(f"/api/v1/scrapers/{scraper_id}/runs/{run_id}", headers=who.headers)
        if run.json()["status"] in ("completed", "failed", "stopped"):
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"run {run_id} did not end")


async def live_rate(page: Page, timeout: float = 15.0) -> float:
    """The requests/s the live page shows once it has measured some."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = (await page.locator("#run-rate-text").inner_text()).strip()
        if text.replace(".", "", 1).isdigit() and float(text) > 0:
            return float(text)
        await asyncio.sleep(0.2)
    raise AssertionError("the live page never showed a request rate")


FIGURES = ("pages", "items", "errors", "retries", "elapsed")


async def assert_accessible(watched: BrowserPage, name: str, screenshot_dir: Path) -> None:
    for width in (1280, 390):
        await watched.page.set_viewport_size({"width": width, "height": 900})
        violations = await axe_violations(watched.page)
        assert not violations, f"{name} at {width}px:\n{describe_violations(violations)}"
    await screenshots(watched.page, screenshot_dir, name)
    await watched.page.set_viewport_size({"width": 1280, "height": 900})
    # Nothing asked of another host (the browser may reach 127.0.0.1 only), nothing the CSP
    # stopped, no script error.
    assert watched.blocked_requests == []
    assert watched.csp_violations == []
    assert watched.page_errors == []


async def test_a_keyboard_made_scraper_runs_live_filters_its_log_and_stops_in_place(
    dashboard: DashboardInBrowser,
) -> None:
    # One page in 25 answers 500 (retried, then an error) and holds one of the crawl's four
    # fetchers for the retries' 3.5 s; the others go on, so at 20/s the first batch of items
    # (100) is stored within seconds, and 1,000 pages last long enough to watch.
    site = LocalWebsite(pages=2000, delay=0.05, fail_every=25)
    await site.start()
    page = dashboard.page
    try:
        await dashboard.signed_in("admin")
        await assert_accessible(dashboard.watched, "dashboard-empty", dashboard.screenshot_dir)
        await page.goto(f"{dashboard.url}/dashboard/scrapers/new")
        # Keyboard only: focus moves field to field with Tab, Enter submits.
        await page.get_by_label("Name").focus()
        await page.keyboard.type("Local shop")
        await page.keyboard.press("Tab")
        await page.keyboard.type(f"{site.url}/page/0")
        await page.keyboard.press("Tab")
        await page.keyboard.type("every day")
        await page.locator("#cron-error").wait_for()
        await page.keyboard.press("Enter")
        error = page.locator("#f-schedule-error")
        await error.wait_for()
        assert "not a valid cron expression" in await error.inner_text()
        assert await page.get_by_label("Name").input_value() == "Local shop"
        await assert_accessible(dashboard.watched, "dashboard-form-error", dashboard.screenshot_dir)
        # Back to the schedule with Tab, and its bad value cleared with keystrokes.
        await page.get_by_label("Name").focus()
        await page.keyboard.press("Tab")
        await page.keyboard.press("Tab")
        assert await page.evaluate("document.activeElement.id") == "f-schedule"
        await page.keyboard.press("ControlOrMeta+A")
        await page.keyboard.press("Backspace")
        assert await page.get_by_label("Schedule (cron, optional)").input_value() == ""
        await page.keyboard.type("0 6 * * *")
        await page.locator("#cron-firings li").nth(2).wait_for()
        assert await page.locator("#cron-firings li").count() == 3
        for _ in range(3):  # the timezone, the proxy pool, the rate limit
            await page.keyboard.press("Tab")
        assert await page.evaluate("document.activeElement.id") == "f-rate_limit"
        await page.keyboard.type("20")
        await page.keyboard.press("Tab")
        await page.keyboard.type("1000")
        await page.keyboard.press("Enter")
        await page.wait_for_url(f"{dashboard.url}/dashboard/scrapers/*")
        await page.get_by_role("button", name="Run now").click()
        await page.wait_for_url("**/runs/*")
        run_url = page.url
        assert await page.get_by_role("heading", level=1).inner_text() == "Run #1"
        # While it runs, its scraper's page offers Stop in Run now's place: no 409 to earn.
        await page.goto(run_url.split("/runs/")[0])
        await page.get_by_role("button", name="Stop").wait_for()
        assert await page.get_by_role("button", name="Run now").count() == 0
        await page.get_by_role("link", name="Watch run #1").click()
        await page.wait_for_url(run_url)
        await page.evaluate("window.notReloaded = true")
        await figure_reaches(page, "#run-pages", 3)
        then = {f: await figure(page, f"#run-{f}") for f in FIGURES}
        lines_then = await page.locator("#log-tail li").count()
        assert lines_then >= 1  # the run's start and robots.txt, tailed
        # The failing pages: retried 0.5, 1 and 2 s later, then counted as errors.
        await figure_reaches(page, "#run-retries", then["retries"] + 1)
        await figure_reaches(page, "#run-errors", then["errors"] + 1, timeout=20)
        await figure_reaches(page, "#run-pages", then["pages"] + 1)
        await figure_reaches(page, "#run-items", then["items"] + 1)
        assert await figure(page, "#run-elapsed") > then["elapsed"]
        assert int(await page.locator("#run-progress").get_attribute("value") or 0) > then["pages"]
        # The current request rate, live, against the scraper's limit.
        assert await page.locator("#run-rate").get_attribute("max") == "20"
        rate = await live_rate(page)
        assert 0 < rate <= 20 * 1.5, rate  # a 3 s window of 0.2 s samples: some jitter
        await lines_exceed(page, lines_then)  # the retries' and failures' lines
        assert await page.evaluate("window.notReloaded") is True
        await assert_accessible(dashboard.watched, "dashboard-run-live", dashboard.screenshot_dir)
        # The least level: warnings and errors only, in the tail drawn and in what streams in.
        assert await page.locator("#log-tail li.log-info").count() >= 1
        await page.get_by_label("Least level").select_option("warning")
        await page.get_by_role("button", name="Filter").click()
        await page.wait_for_url("**/runs/*?level=warning&q=")
        filtered_then = await page.locator("#log-tail li").count()
        assert filtered_then >= 1
        await lines_exceed(page, filtered_then)
        levels = await page.locator("#log-tail li strong").all_inner_texts()
        assert set(levels) <= {"warning", "error"}, levels
        assert await page.locator("#log-tail li.log-info").count() == 0
        # Stopped from the live page, which stays: the stream brings `stopped`, the final
        # figures, the first items and no Stop button, without a reload.
        await page.evaluate("window.notReloaded = true")
        asked = time.monotonic()
        await page.get_by_role("button", name="Stop").click()
        await page.locator("#run-status", has_text="stopped").wait_for(timeout=5_000)
        assert time.monotonic() - asked < 5.0
        await page.locator("#figures[data-settled]").wait_for()
        await page.locator("#results tbody tr").first.wait_for()
        assert await page.locator("#results tbody tr").count() == min(
            int(await figure(page, "#run-items")), 50
        )
        assert await page.get_by_role("button", name="Stop").count() == 0
        # The end is told in the status region, in place of the "Stopping." told before.
        await page.locator("#flashes", has_text="Run #1 stopped.").wait_for()
        assert await page.get_by_text("Stopping.").count() == 0
        assert "run ended" in await page.locator("#log-tail").inner_text()
        assert await page.evaluate("window.notReloaded") is True
        assert page.url.endswith("?level=warning&q=")
        await assert_accessible(
            dashboard.watched, "dashboard-run-stopped", dashboard.screenshot_dir
        )
    finally:
        await site.stop()


async def test_a_finished_run_shows_its_items_and_its_xlsx_holds_the_json_download(
    dashboard: DashboardInBrowser, website: LocalWebsite
) -> None:
    page = dashboard.page
    who = await make_client(dashboard.engine, "write")
    async with httpx.AsyncClient(base_url=dashboard.url) as api:
        made = await api.post(
            "/api/v1/scrapers",
            json={
                "name": "catalog",
                "url": f"{website.url}/page/0",
                "max_pages": 4,
                "rate_limit": 50,
                "selectors": {"title": "title::text", "h1": "h1::text"},
            },
            headers=who.headers,
        )
        scraper_id = made.json()["id"]
        # Two earlier, smaller runs first: the scraper's chart and sparkline have a history.
        for pages in (2, 3, 4):
            await api.patch(
                f"/api/v1/scrapers/{scraper_id}", json={"max_pages": pages}, headers=who.headers
            )
            run_id = (
                await api.post(f"/api/v1/scrapers/{scraper_id}/run", headers=who.headers)
            ).json()["run_id"]
            if pages < 4:
                await run_ends(api, who, scraper_id, run_id)
    await dashboard.open(who)
    await page.goto(f"{dashboard.url}/dashboard/scrapers/{scraper_id}/runs/{run_id}")
    await page.locator("#run-status", has_text="completed").wait_for(timeout=20_000)
    # Drawn with the page, or brought by the stream's end event if the run was still going.
    await page.locator("#results tbody tr").nth(3).wait_for()
    assert await page.locator("#results tbody tr").count() == 4
    async with page.expect_download() as xlsx_download:
        await page.get_by_role("link", name="XLSX").click()
    xlsx = await asyncio.to_thread(Path(await (await xlsx_download.value).path()).read_bytes)
    async with page.expect_download() as json_download:
        await page.get_by_role("link", name="JSON", exact=True).click()
    json_path = Path(await (await json_download.value).path())
    items = json.loads(await asyncio.to_thread(json_path.read_text))
    for fmt in ("JSONL", "CSV"):
        async with page.expect_download() as other:
            await page.get_by_role("link", name=fmt, exact=True).click()
        text = await asyncio.to_thread(Path(await (await other.value).path()).read_text)
        if fmt == "JSONL":
            assert [json.loads(line) for line in text.splitlines()] == items
        else:
            assert [row["url"] for row in csv.DictReader(io.StringIO(text))] == [
                item["url"] for item in items
            ]
    rows = list(load_workbook(io.BytesIO(xlsx))["results"].iter_rows(values_only=True))
    header = list(rows[0])
    assert [dict(zip(header, row, strict=True)) for row in rows[1:]] == [
        {c: item.get(c) for c in header} for item in items
    ]
    await assert_accessible(dashboard.watched, "dashboard-run-done", dashboard.screenshot_dir)
    await page.goto(f"{dashboard.url}/dashboard/scrapers/{scraper_id}")
    assert await page.locator(".run-chart polyline").count() == 2
    await assert_accessible(dashboard.watched, "dashboard-scraper", dashboard.screenshot_dir)
    await page.get_by_role("link", name="Edit", exact=True).click()
    await page.wait_for_url(f"{dashboard.url}/dashboard/scrapers/{scraper_id}/edit")
    assert await page.get_by_label("Max pages").input_value() == "4"
    await assert_accessible(dashboard.watched, "dashboard-edit", dashboard.screenshot_dir)
    await page.goto(f"{dashboard.url}/dashboard/scrapers/{scraper_id}")
    # The chart's lines take the text's colour: readable in the dark scheme too.
    await page.emulate_media(color_scheme="dark")
    await assert_accessible(dashboard.watched, "dashboard-scraper-dark", dashboard.screenshot_dir)
    await page.emulate_media(color_scheme="light")
    async with httpx.AsyncClient(base_url=dashboard.url) as api:
        scheduled = await api.post(
            "/api/v1/scrapers",
            json={
                "name": "morning prices",
                "url": f"{website.url}/page/1",
                "schedule": "30 7 * * 1-5",
                "timezone": "Europe/Paris",
            },
            headers=who.headers,
        )
        assert scheduled.status_code == 201, scheduled.text
    await page.goto(f"{dashboard.url}/dashboard/")
    assert await page.get_by_text("every weekday at 07:30").count() == 1
    assert await page.locator("svg.sparkline").count() == 1
    await assert_accessible(dashboard.watched, "dashboard-scrapers", dashboard.screenshot_dir)
    await page.goto(f"{dashboard.url}/dashboard/webhooks")
    await page.get_by_role("button", name="Add webhook").wait_for()
    await assert_accessible(dashboard.watched, "dashboard-webhooks", dashboard.screenshot_dir)


async def test_a_dashboard_link_asks_before_signing_in_and_works_once(
    dashboard: DashboardInBrowser,
) -> None:
    page = dashboard.page
    who = await make_client(dashboard.engine, "write")
    async with httpx.AsyncClient(base_url=dashboard.url) as api:
        link = str((await api.post("/api/v1/dashboard-links", headers=who.headers)).json()["url"])
    await page.goto(link)
    await page.get_by_text(who.owner).first.wait_for()
    await assert_accessible(dashboard.watched, "dashboard-link", dashboard.screenshot_dir)
    await page.get_by_role("button", name="Continue to the dashboard").click()
    await page.wait_for_url(f"{dashboard.url}/dashboard/")
    answer = await page.goto(link)
    assert answer is not None
    assert answer.status == 410
    await page.get_by_text("This dashboard link was already used").wait_for()
    await assert_accessible(dashboard.watched, "dashboard-link-used", dashboard.screenshot_dir)


async def test_the_login_page_refuses_a_wrong_key_at_the_field_and_signs_in_with_a_key(
    dashboard: DashboardInBrowser,
) -> None:
    page = dashboard.page
    reader = await make_client(dashboard.engine, "read")
    await page.goto(f"{dashboard.url}/dashboard/webhooks")
    await page.wait_for_url(f"{dashboard.url}/dashboard/login?next=/dashboard/webhooks")
    await assert_accessible(dashboard.watched, "dashboard-login", dashboard.screenshot_dir)
    await page.get_by_label("API key").fill("smk_not_a_key")
    await page.get_by_role("button", name="Sign in").click()
    await page.get_by_text("That key is not valid.").wait_for()
    await assert_accessible(dashboard.watched, "dashboard-login-refused", dashboard.screenshot_dir)
    await page.get_by_label("API key").fill(reader.headers["Authorization"].removeprefix("Bearer "))
    await page.get_by_role("button", name="Sign in").click()
    await page.wait_for_url(f"{dashboard.url}/dashboard/webhooks")
    assert await page.locator(".who .badge").inner_text() == "read"


async def test_a_read_session_has_no_write_control_and_another_owner_gets_404(
    dashboard: DashboardInBrowser,
) -> None:
    page = dashboard.page
    reader = await make_client(dashboard.engine, "read")
    mine = await make_scraper(dashboard.engine, reader.owner)
    theirs = await make_run(dashboard.engine, await make_scraper(dashboard.engine, "someone-else"))
    await dashboard.open(reader)
    await page.goto(f"{dashboard.url}/dashboard/scrapers/{mine.id}")
    assert await page.get_by_role("button").filter(has_text="Run now").count() == 0
    assert await page.get_by_role("button").filter(has_text="Delete").count() == 0
    # Nor does a post forged with the page's own CSRF token work: refused for the level (not
    # as a bad form), and nothing changed.
    token = await page.locator('input[name="csrf_token"]').first.input_value()
    mine_url = f"{dashboard.url}/dashboard/scrapers/{mine.id}"
    for action, fields in (("run", {}), ("edit", {"name": "renamed", "url": mine.url})):
        forged = await page.request.post(
            f"{mine_url}/{action}", form={"csrf_token": token, **fields}
        )
        assert forged.status == 403, action
        assert "This needs a write session" in await forged.text(), action
    async with httpx.AsyncClient(base_url=dashboard.url, headers=reader.headers) as api:
        assert (await api.get(f"/api/v1/scrapers/{mine.id}")).json()["name"] == mine.name
        assert (await api.get(f"/api/v1/scrapers/{mine.id}/runs")).json()["data"] == []
    base = f"{dashboard.url}/dashboard/scrapers/{theirs.scraper_id}"
    run = f"{base}/runs/{theirs.id}"
    downloads = [f"{run}/results.{fmt}" for fmt in ("json", "jsonl", "csv", "xlsx")]
    for path in (base, run, f"{run}/log.txt", *downloads):
        answer = await page.goto(path)
        assert answer is not None
        assert answer.status == 404, path
    await page.goto(base)
    await page.get_by_role("heading", name="Not found").wait_for()
    await assert_accessible(dashboard.watched, "dashboard-not-found", dashboard.screenshot_dir)


async def test_the_api_docs_render_offline(dashboard: DashboardInBrowser) -> None:
    page = dashboard.page
    await page.goto(f"{dashboard.url}/docs")
    await page.locator(".swagger-ui .information-container").wait_for()
    await page.get_by_text("scraper-manager").first.wait_for()
    await page.goto(f"{dashboard.url}/redoc")
    await page.locator(".api-content h1", has_text="scraper-manager").wait_for()
    await screenshots(page, dashboard.screenshot_dir, "scrapers-redoc")
    assert dashboard.watched.blocked_requests == []
    # ReDoc hard-codes its footer logo from its CDN: the CSP stops it before any request.
    assert [v for v in dashboard.watched.csp_violations if "redoc.ly" not in v] == []


# -- issue 35: what to scrape, live items, copy buttons, a run's items on a phone ----------------


async def light_and_dark(watched: BrowserPage, name: str, screenshot_dir: Path) -> None:
    """axe-core clean at 1280 and 390 px in both schemes, with screenshots of each."""
    await assert_accessible(watched, name, screenshot_dir)
    await watched.page.emulate_media(color_scheme="dark")
    await assert_accessible(watched, f"{name}-dark", screenshot_dir)
    await watched.page.emulate_media(color_scheme="light")


async def test_the_form_says_what_to_scrape_refuses_a_bad_field_at_it_and_the_run_uses_it(
    dashboard: DashboardInBrowser, website: LocalWebsite
) -> None:
    page = dashboard.page
    await dashboard.signed_in("write")
    await page.goto(f"{dashboard.url}/dashboard/scrapers/new")
    await page.get_by_label("Name").fill("Headings")
    await page.get_by_label("Start URL").fill(f"{website.url}/page/0")
    await page.get_by_label("Max pages").fill("3")
    await page.get_by_label("Rate limit (requests per second)").fill("50")
    await page.get_by_label("Item selector (optional)").fill("body")
    await page.get_by_label("Fields").fill("heading: h1::text\ntitle: title::text[")
    await page.get_by_label("Links to follow (optional)").fill("a")
    await page.get_by_label("Max depth (optional)").fill("1")
    await page.get_by_label("Obey robots.txt").uncheck()
    await page.get_by_label("Concurrency").fill("2")
    await page.get_by_role("button", name="Create scraper").click()
    # The API's own refusal, beside the field, tied to it; what was typed stays.
    error = page.locator("#f-selectors-error")
    await error.wait_for()
    assert "is not a valid CSS or XPath expression" in await error.inner_text()
    assert await page.get_by_label("Fields").get_attribute("aria-invalid") == "true"
    assert await page.get_by_label("Item selector (optional)").input_value() == "body"
    assert not await page.get_by_label("Obey robots.txt").is_checked()
    await light_and_dark(
        dashboard.watched, "dashboard-form-what-to-scrape", dashboard.screenshot_dir
    )
    await page.get_by_label("Fields").fill("heading: h1::text\ntitle: title::text")
    await page.get_by_role("button", name="Create scraper").click()
    await page.wait_for_url(f"{dashboard.url}/dashboard/scrapers/*")
    facts = await page.locator("dl.facts").inner_text()
    for shown in ("each body", "heading: h1::text", "title: title::text", "ignored", "2 at a time"):
        assert shown in facts, facts
    await light_and_dark(dashboard.watched, "dashboard-scraper-config", dashboard.screenshot_dir)
    await page.get_by_role("button", name="Run now").click()
    await page.wait_for_url("**/runs/*")
    await page.locator("#run-status", has_text="completed").wait_for(timeout=20_000)
    await page.locator("#results tbody tr").first.wait_for()
    headers = await page.locator("#results thead th").all_inner_texts()
    assert headers[0] == "url"
    assert sorted(headers[1:]) == ["heading", "title"]
    # Depth 1 from page 0: pages 0, 1 and 2, one item each.
    assert await page.locator("#results tbody tr").count() == 3


async def test_the_live_run_page_counts_the_items_stored_while_the_run_runs(
    dashboard: DashboardInBrowser,
) -> None:
    # One item a page at 10 pages a second: a batch (100) would take 10 s.
    site = LocalWebsite(pages=400)
    await site.start()
    page = dashboard.page
    try:
        who = await make_client(dashboard.engine, "write")
        async with httpx.AsyncClient(base_url=dashboard.url) as api:
            made = await api.post(
                "/api/v1/scrapers",
                json={"name": "slow", "url": f"{site.url}/page/0", "rate_limit": 10},
                headers=who.headers,
            )
            scraper_id = made.json()["id"]
            await dashboard.open(who)
            run_id = (
                await api.post(f"/api/v1/scrapers/{scraper_id}/run", headers=who.headers)
            ).json()["run_id"]
            await page.goto(f"{dashboard.url}/dashboard/scrapers/{scraper_id}/runs/{run_id}")
            await figure_reaches(page, "#run-items", 1, timeout=8)
            assert await page.locator("#run-status").inner_text() == "running"
            assert await figure(page, "#run-pages") < 100
            await api.post(f"/api/v1/scrapers/{scraper_id}/stop", headers=who.headers)
            await page.locator("#run-status", has_text="stopped").wait_for(timeout=10_000)
    finally:
        await site.stop()


async def test_a_copy_button_copies_the_id_and_says_so_in_the_status_region(
    dashboard: DashboardInBrowser,
) -> None:
    page = dashboard.page
    who = await make_client(dashboard.engine, "write")
    scraper = await make_scraper(dashboard.engine, who.owner)
    await dashboard.open(who)
    await page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    await page.goto(f"{dashboard.url}/dashboard/scrapers/{scraper.id}")
    await page.get_by_role("button", name="Copy the scraper's id").click()
    # Said in the page's role=status region, which screen readers announce.
    region = page.locator('#flashes[role="status"][aria-live="polite"]')
    await region.get_by_text("Copied to the clipboard.").wait_for()
    assert await page.evaluate("navigator.clipboard.readText()") == str(scraper.id)
    assert dashboard.watched.csp_violations == []
    assert dashboard.watched.page_errors == []


async def test_a_runs_fifty_items_stay_a_short_page_on_a_phone_and_each_opens_in_full(
    dashboard: DashboardInBrowser,
) -> None:
    page = dashboard.page
    who = await make_client(dashboard.engine, "read")
    scraper = await make_scraper(dashboard.engine, who.owner)
    run = await make_run(dashboard.engine, scraper, items=0)
    long_text = "A long description of the product, " * 20
    async with create_session_factory(dashboard.engine)() as session, session.begin():
        session.add_all(
            Item(
                run_id=run.id,
                scraper_id=scraper.id,
                url=f"https://shop.example/catalog/products/{n}/a-rather-long-slug-for-it",
                data={
                    "title": f"Product {n}",
                    "description": long_text,
                    "price": f"{n}.00",
                    "tags": ["one", "two"],
                },
            )
            for n in range(60)
        )
    await dashboard.open(who)
    await page.set_viewport_size({"width": 390, "height": 900})
    await page.goto(f"{dashboard.url}/dashboard/scrapers/{scraper.id}/runs/{run.id}")
    assert await page.locator("#results tbody tr").count() == 50
    # The items themselves, not the page (whose other sections grow with other features):
    # each a short card, where one took about 200 px and 50 of them a 10,000 px page before.
    height = await page.locator("#results").evaluate("e => e.getBoundingClientRect().height")
    assert height < 50 * 80, height
    width = await page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, width
    await light_and_dark(dashboard.watched, "dashboard-run-items", dashboard.screenshot_dir)
    await page.set_viewport_size({"width": 390, "height": 900})
    await page.locator("#results tbody tr").nth(7).get_by_role("link").click()
    await page.wait_for_url("**/items/*")
    facts = await page.locator("dl.item-facts").inner_text()
    assert "Product 7" in facts
    assert long_text.strip() in facts  # in full, not cut
    assert '"one"' in facts
    await light_and_dark(dashboard.watched, "dashboard-item", dashboard.screenshot_dir)


async def test_the_scrapers_list_is_searched_and_each_row_runs_and_stops_its_scraper(
    dashboard: DashboardInBrowser,
) -> None:
    # A slow site: the run is still going when it is stopped from its row.
    site = LocalWebsite(pages=400, delay=0.2)
    await site.start()
    page = dashboard.page
    try:
        who = await make_client(dashboard.engine, "write")
        for name in ("Shoes", "Shirts", "News"):
            await make_scraper(dashboard.engine, who.owner, name=name, url=f"{site.url}/page/0")
        await dashboard.open(who)
        await page.get_by_label("Name or URL contains").fill("sh")
        await page.get_by_role("button", name="Filter").click()
        await page.wait_for_url("**/dashboard/?q=sh*")
        rows = page.locator("table.data tbody tr")
        assert await rows.count() == 2
        await light_and_dark(
            dashboard.watched, "dashboard-scrapers-search", dashboard.screenshot_dir
        )
        await page.get_by_role("button", name="Run now: Shoes").click()
        await page.wait_for_url("**/runs/*")
        await page.go_back()
        await page.reload()
        await page.get_by_role("button", name="Stop: Shoes").click()
        await page.wait_for_url("**/runs/*")
        await page.locator("#run-status", has_text="stopped").wait_for(timeout=10_000)
    finally:
        await site.stop()


async def test_a_runs_items_are_browsed_and_searched_its_log_searched_and_its_answers_counted(
    dashboard: DashboardInBrowser,
) -> None:
    page = dashboard.page
    who = await make_client(dashboard.engine, "read")
    scraper = await make_scraper(dashboard.engine, who.owner)
    run = await make_run(dashboard.engine, scraper, items=70)
    async with create_session_factory(dashboard.engine)() as session, session.begin():
        stored = await session.get(Run, run.id)
        assert stored is not None
        stored.status_counts = {"200": 68, "404": 1, "503": 2, "robots_denied": 1}
        session.add(stored)
        session.add_all(
            RunLogLine(run_id=run.id, level=level, at=datetime.now(UTC), message=text)
            for level, text in (
                (LogLevel.INFO, "run started"),
                (LogLevel.WARNING, "request failed, retrying"),
                (LogLevel.INFO, "run ended"),
            )
        )
    await dashboard.open(who)
    await page.goto(f"{dashboard.url}/dashboard/scrapers/{scraper.id}/runs/{run.id}")
    codes = page.get_by_role("table", name="Answers by status code")
    assert await codes.locator("tbody tr").count() == 4
    await page.get_by_label("Contains").fill("RETRY")
    await page.get_by_role("button", name="Filter").click()
    await page.wait_for_url("**/runs/*?*q=RETRY*")
    assert await page.locator("#log-tail li").count() == 1
    await light_and_dark(dashboard.watched, "dashboard-run-searched", dashboard.screenshot_dir)
    await page.get_by_role("link", name="browse and search every item").click()
    await page.wait_for_url("**/items")
    assert await page.locator("#items tbody tr").count() == 50
    await page.get_by_role("link", name="Next page").click()
    assert await page.locator("#items tbody tr").count() == 20
    await page.get_by_label("URL or value contains").fill("page-6")
    await page.get_by_role("button", name="Search").click()
    await page.wait_for_url("**/items?q=page-6")
    # page-6 and page-60 to page-69.
    assert await page.locator("#items tbody tr").count() == 11
    await light_and_dark(dashboard.watched, "dashboard-items", dashboard.screenshot_dir)
