"""Two runs of a scraper side by side (issue 35): figures, answers by status code and changes,
each with its difference; as pure code, and in Debian's Chromium against `serve` and
`worker` as processes, axe-core at 1280 and 390 px in light and dark."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from scraper_manager.dashboard.run_compare import compare_runs, default_pair, run_changes
from scraper_manager.models import Run, RunStatus
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.dashboard import DashboardInBrowser
from tests.factories import make_client, make_run, make_scraper
from tests.test_dashboard_browser import light_and_dark

START = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


def run(number: int, **fields: Any) -> Run:
    return Run(id=number, scraper_id=1, number=number, owner="o", **fields)


def test_each_figure_is_shown_with_its_change_from_the_first_run_to_the_second() -> None:
    first = run(
        1,
        pages_fetched=40,
        items_collected=80,
        started_at=START,
        finished_at=START + timedelta(seconds=20),
    )
    second = run(
        2,
        pages_fetched=50,
        items_collected=70,
        started_at=START,
        finished_at=START + timedelta(seconds=12.5),
    )
    figures = {f.label: (f.first, f.second, f.change) for f in compare_runs(first, second).figures}
    assert figures["Pages fetched"] == (40, 50, 10)
    assert figures["Items collected"] == (80, 70, -10)
    assert figures["Duration (s)"] == (20.0, 12.5, -7.5)


def test_a_run_that_has_not_ended_has_no_duration_nor_change_of_it() -> None:
    figures = {f.label: f for f in compare_runs(run(1, started_at=START), run(2)).figures}
    assert figures["Duration (s)"].change is None


def test_status_codes_of_either_run_are_listed_once_with_zero_where_the_other_had_none() -> None:
    first = run(1, status_counts={"200": 9, "404": 1})
    second = run(2, status_counts={"200": 7, "500": 3, "robots_denied": 2})
    rows = [(s.code, s.first, s.second, s.change) for s in compare_runs(first, second).statuses]
    assert rows == [
        ("200", 9, 7, -2),
        ("404", 1, 0, -1),
        ("500", 0, 3, 3),
        ("robots_denied", 0, 2, 2),
    ]


def test_changes_are_read_totally_and_absent_when_a_run_was_not_compared() -> None:
    assert run_changes(None) is None
    got = run_changes({"compared_run_id": 7, "added": 2, "changed": "x", "removed": -1})
    assert got is not None
    assert (got.compared_run_id, got.added, got.changed, got.removed) == (7, 2, 0, 0)


def test_by_default_the_last_two_runs_that_crawled_are_compared_oldest_first() -> None:
    newest_first = [
        run(5, status=RunStatus.SKIPPED),
        run(4, status=RunStatus.COMPLETED),
        run(3, status=RunStatus.FAILED),
        run(2, status=RunStatus.COMPLETED),
    ]
    assert default_pair(newest_first) == (3, 4)
    assert default_pair(newest_first[:2]) is None


async def _shape(
    engine: AsyncEngine,
    run_id: int,
    *,
    pages_fetched: int,
    status_counts: dict[str, int],
    started_at: datetime,
    finished_at: datetime,
    changes: dict[str, int] | None = None,
) -> None:
    async with engine.begin() as connection:
        await connection.execute(
            text(
                "UPDATE runs SET pages_fetched = :pages, status_counts = CAST(:counts AS jsonb),"
                " started_at = :started, finished_at = :finished,"
                " changes = CAST(:changes AS jsonb) WHERE id = :id"
            ),
            {
                "id": run_id,
                "pages": pages_fetched,
                "counts": json.dumps(status_counts),
                "started": started_at,
                "finished": finished_at,
                "changes": json.dumps(changes) if changes is not None else None,
            },
        )


async def test_two_runs_are_compared_side_by_side_from_the_scrapers_page(
    dashboard: DashboardInBrowser,
) -> None:
    page = dashboard.page
    who = await make_client(dashboard.engine, "read")
    scraper = await make_scraper(dashboard.engine, who.owner, item_key="sku")
    first = await make_run(dashboard.engine, scraper, items=3)
    second = await make_run(dashboard.engine, scraper, items=5)
    await _shape(
        dashboard.engine,
        first.id,
        pages_fetched=12,
        status_counts={"200": 11, "404": 1},
        started_at=START,
        finished_at=START + timedelta(seconds=30),
    )
    await _shape(
        dashboard.engine,
        second.id,
        pages_fetched=15,
        status_counts={"200": 12, "500": 3},
        started_at=START + timedelta(hours=1),
        finished_at=START + timedelta(hours=1, seconds=24),
        changes={"compared_run_id": first.id, "added": 2, "changed": 1, "removed": 0},
    )
    await dashboard.open(who)
    await page.goto(f"{dashboard.url}/dashboard/scrapers/{scraper.id}")
    await page.get_by_role("link", name="Compare two runs").click()
    figures = page.locator("#compare-figures")
    await figures.wait_for()
    pages_row = figures.get_by_role("row", name="Pages fetched")
    assert [t.strip() for t in await pages_row.locator("td").all_inner_texts()] == [
        "12",
        "15",
        "+3",
    ]
    items_row = figures.get_by_role("row", name="Items collected")
    assert [t.strip() for t in await items_row.locator("td").all_inner_texts()] == ["3", "5", "+2"]
    statuses = page.locator("#compare-statuses tbody tr")
    assert await statuses.count() == 3  # 200, 404, 500: each once
    server_errors = page.locator("#compare-statuses").get_by_role("row", name="500")
    assert [t.strip() for t in await server_errors.locator("td").all_inner_texts()] == [
        "0",
        "3",
        "+3",
    ]
    changes = page.locator("#compare-changes")
    assert (
        await changes.get_by_text(f"Run #{second.number}: 2 added, 1 changed, 0 removed").count()
        == 1
    )
    assert await changes.get_by_text(f"Run #{first.number}: not compared").count() == 1
    await light_and_dark(dashboard.watched, "dashboard-compare", dashboard.screenshot_dir)
    # The pair picked in the form is the pair shown.
    await page.get_by_label("Run", exact=True).select_option(str(second.id))
    await page.get_by_label("Compared with").select_option(str(first.id))
    await page.get_by_role("button", name="Compare").click()
    await page.wait_for_url(f"**first={second.id}&second={first.id}")
    pages_row = page.locator("#compare-figures").get_by_role("row", name="Pages fetched")
    assert [t.strip() for t in await pages_row.locator("td").all_inner_texts()] == [
        "15",
        "12",
        "\N{MINUS SIGN}3",
    ]
