"""The dashboard over HTTP: links and sign-in, the scraper form's validation at the field,
levels, owner isolation, downloads. (In a browser: test_dashboard_browser.py.)"""

from __future__ import annotations

import html
import io
import os
import re
import uuid
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from openpyxl import load_workbook
from scraper_manager.app import create_app
from scraper_manager.dashboard.charts import run_chart, sparkline
from scraper_manager.dashboard.cron_words import describe
from scraper_manager.dashboard.forms import parse_headers, preview_firings, read_form
from scraper_manager.dashboard.links import dashboard_links
from scraper_manager.dashboard.live import RateMeter, average_rate, requests_made
from scraper_manager.models import Run, RunStatus
from scraper_manager.scrapers.repository import ScraperRepository
from scraper_manager.settings import Settings
from servicekit.auth import AccessLevel
from servicekit.db.engine import create_session_factory
from servicekit.testing import serve_app
from servicekit.testing.console import run_console_script
from sqlalchemy import event, text
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.dashboard import DASH, new_scraper_form, sign_in, signed_in_as_new, token_in
from tests.factories import Client, make_client, make_run, make_scraper
from tests.test_export import XLSX_ITEMS, _run_with

EDIT = {
    "name": "Renamed",
    "url": "http://127.0.0.1:9/start",
    "schedule": "0 6 * * 1",
    "timezone": "Europe/Paris",
    "proxy_pool": "",
    "rate_limit": "2",
    "max_pages": "30",
    "headers": "Accept-Language: fr\nX-Trace: a:b",
}


async def new_link(client: httpx.AsyncClient, who: Client) -> str:
    """A link's path from the API, and a browser with no session yet to open it."""
    issued = await client.post("/api/v1/dashboard-links", headers=who.headers)
    assert issued.status_code == 201, issued.text
    client.cookies.clear()
    return httpx.URL(issued.json()["url"]).path


async def open_link(client: httpx.AsyncClient, path: str) -> httpx.Response:
    """As a person does: the landing page, then its button (a POST with the CSRF token)."""
    landing = await client.get(path)
    assert landing.status_code == 200, landing.text
    return await client.post(path, data={"csrf_token": token_in(landing.text)})


async def test_a_dashboard_link_signs_in_once_as_the_keys_owner_and_level(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "read")
    issued = await client.post("/api/v1/dashboard-links", headers=who.headers)
    assert issued.status_code == 201
    body = issued.json()
    assert datetime.fromisoformat(body["expires_at"]) > datetime.now(UTC)
    path = httpx.URL(body["url"]).path
    client.cookies.clear()
    first = await open_link(client, path)
    assert first.status_code == 303
    assert first.headers["location"] == f"{DASH}/"
    home = await client.get(f"{DASH}/")
    assert who.owner in home.text
    assert ">read<" in home.text


async def links_of(db_engine: AsyncEngine, owner: str) -> int:
    async with db_engine.connect() as connection:
        count = await connection.scalar(
            text("SELECT count(*) FROM dashboard_links WHERE owner = :o"), {"o": owner}
        )
    return int(count or 0)


async def lifetime_of(client: httpx.AsyncClient, who: Client, **body: object) -> timedelta:
    """How long a link asked for with `body` (none at all when empty) stays usable."""
    before = datetime.now(UTC)
    issued = await client.post("/api/v1/dashboard-links", json=body or None, headers=who.headers)
    assert issued.status_code == 201, issued.text
    return datetime.fromisoformat(issued.json()["expires_at"]) - before


async def test_a_dashboard_link_lasts_the_operators_15_minutes_unless_asked_otherwise(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "read")
    for lifetime in (
        await lifetime_of(client, who),
        await lifetime_of(client, who, ttl_seconds=None),
    ):
        assert timedelta(minutes=14) < lifetime <= timedelta(minutes=15, seconds=5)


async def test_a_dashboard_link_lasts_the_ttl_asked_for(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "read")
    lifetime = await lifetime_of(client, who, ttl_seconds=7200)
    assert timedelta(minutes=119) < lifetime <= timedelta(hours=2, seconds=5)


@pytest.mark.parametrize("ttl", [86401, 59])
async def test_a_dashboard_link_ttl_outside_a_minute_to_a_day_is_422_and_creates_nothing(
    client: httpx.AsyncClient, db_engine: AsyncEngine, ttl: int
) -> None:
    who = await make_client(db_engine, "write")
    answer = await client.post(
        "/api/v1/dashboard-links", json={"ttl_seconds": ttl}, headers=who.headers
    )
    assert answer.status_code == 422
    assert "ttl_seconds" in answer.json()["error"]
    assert await links_of(db_engine, who.owner) == 0


async def test_merely_fetching_a_dashboard_link_does_not_spend_it(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "write")
    path = await new_link(client, who)
    for _ in range(3):  # link previews, mail scanners
        landing = await client.get(path)
        assert landing.status_code == 200
        assert "Continue to the dashboard" in landing.text
    assert (await open_link(client, path)).status_code == 303


async def test_a_used_dashboard_link_shows_a_410_page(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "write")
    path = await new_link(client, who)
    assert (await open_link(client, path)).status_code == 303
    client.cookies.clear()
    again = await client.get(path)
    assert again.status_code == 410
    assert "This dashboard link was already used" in again.text
    assert "text/html" in again.headers["content-type"]


async def test_an_expired_dashboard_link_shows_a_410_page_saying_so(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    async with create_session_factory(db_engine)() as session, session.begin():
        issued = await dashboard_links(session).issue(
            "acme",
            AccessLevel.READ,
            base_url="http://x",
            ttl=timedelta(minutes=15),
            api_key_id=None,
            now=datetime.now(UTC) - timedelta(minutes=16),
        )
    client.cookies.clear()
    response = await client.get(httpx.URL(issued.url).path)
    assert response.status_code == 410
    assert "This dashboard link has expired" in response.text


async def test_an_unknown_dashboard_link_is_a_404_page(client: httpx.AsyncClient) -> None:
    response = await client.get(f"{DASH}/link/not-a-real-token")
    assert response.status_code == 404
    assert "This dashboard link is not valid" in response.text


async def test_opening_a_dashboard_link_without_the_csrf_token_is_refused(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "write")
    path = await new_link(client, who)
    assert (await client.post(path, data={})).status_code == 403
    assert (await client.get(path)).status_code == 200  # the link is not spent


async def test_a_wrong_key_does_not_sign_in(client: httpx.AsyncClient) -> None:
    client.cookies.clear()
    form = await client.get(f"{DASH}/login")
    answer = await client.post(
        f"{DASH}/login", data={"api_key": "smk_wrong", "csrf_token": token_in(form.text)}
    )
    assert answer.status_code == 401
    assert "not valid" in answer.text


async def test_without_a_session_pages_redirect_to_sign_in(client: httpx.AsyncClient) -> None:
    client.cookies.clear()
    answer = await client.get(f"{DASH}/")
    assert answer.status_code == 303
    assert answer.headers["location"].startswith(f"{DASH}/login")


async def test_a_bad_cron_is_shown_at_the_schedule_field_and_nothing_is_created(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who, token = await signed_in_as_new(client, db_engine, "write")
    answer = await new_scraper_form(
        client,
        token,
        {"name": "shop", "url": "http://127.0.0.1:9/", "schedule": "every day", "timezone": "UTC"},
    )
    assert answer.status_code == 422
    assert re.search(r'id="f-schedule-error">[^<]*not a valid cron expression', answer.text)
    assert 'value="every day"' in answer.text  # what was typed is kept
    listed = await client.get("/api/v1/scrapers", headers=who.headers)
    assert listed.json()["data"] == []


async def test_a_good_form_creates_the_scraper_through_the_service(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who, token = await signed_in_as_new(client, db_engine, "write")
    answer = await new_scraper_form(
        client,
        token,
        {
            "name": "shop",
            "url": "http://127.0.0.1:9/",
            "schedule": "0 6 * * *",
            "timezone": "Europe/Paris",
            "headers": "X-Token: abc",
        },
    )
    assert answer.status_code == 303
    created = (await client.get("/api/v1/scrapers", headers=who.headers)).json()["data"][0]
    assert created["schedule"] == "0 6 * * *"
    assert created["headers"] == {"X-Token": "abc"}
    assert answer.headers["location"] == f"{DASH}/scrapers/{created['id']}"


def test_the_cron_preview_gives_three_firings_in_the_timezone() -> None:
    now = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
    firings, error = preview_firings("0 6 * * *", "Europe/Paris", now)
    assert error is None
    assert [f.isoformat() for f in firings] == [
        "2030-01-02T05:00:00+00:00",
        "2030-01-03T05:00:00+00:00",
        "2030-01-04T05:00:00+00:00",
    ]


def test_the_cron_preview_of_a_bad_expression_is_the_apis_message() -> None:
    firings, error = preview_firings("61 * * * *", "UTC", datetime(2030, 1, 1, tzinfo=UTC))
    assert firings == []
    assert error is not None
    assert "not a valid cron expression" in error


def test_a_header_line_without_a_colon_is_an_error_at_the_field() -> None:
    assert parse_headers("X-A: 1\n\nX-B:2") == ({"X-A": "1", "X-B": "2"}, None)
    form = read_form({"name": "n", "url": "http://127.0.0.1:9/", "headers": "nonsense"})
    assert form.config is None
    assert form.errors["headers"] == "Line 1: write each header as Name: value"


async def test_the_cron_preview_fragment_lists_the_next_firings(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    await sign_in(client, await make_client(db_engine, "read"))
    answer = await client.get(f"{DASH}/cron-preview", params={"schedule": "*/5 * * * *"})
    assert answer.text.count("<li>") == 3


async def test_a_read_session_sees_no_write_control_and_its_posts_are_refused(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "read")
    scraper = await make_scraper(db_engine, who.owner)
    token = await sign_in(client, who)
    page = await client.get(f"{DASH}/scrapers/{scraper.id}")
    assert page.status_code == 200
    assert "Run now" not in page.text
    assert "Delete" not in page.text
    assert "New scraper</a>" not in (await client.get(f"{DASH}/")).text.split("</nav>")[1]
    for action in ("run", "stop", "delete"):
        answer = await client.post(
            f"{DASH}/scrapers/{scraper.id}/{action}", data={"csrf_token": token}
        )
        assert answer.status_code == 403, action
    assert (await client.get(f"{DASH}/scrapers/new")).status_code == 403


async def test_an_admin_deletes_a_scraper_with_its_runs_and_is_told_so(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "admin")
    scraper = await make_scraper(db_engine, who.owner, name="doomed catalog")
    kept = await make_scraper(db_engine, who.owner, name="kept catalog")
    run = await make_run(db_engine, scraper, items=3)
    token = await sign_in(client, who)
    page = await client.get(f"{DASH}/scrapers/{scraper.id}")
    assert 'data-confirm="Delete doomed catalog and all its runs?"' in page.text
    answer = await client.post(f"{DASH}/scrapers/{scraper.id}/delete", data={"csrf_token": token})
    assert answer.status_code == 303
    assert answer.headers["location"] == f"{DASH}/"
    home = await client.get(answer.headers["location"])
    assert "Scraper deleted." in home.text
    assert "doomed catalog" not in home.text
    assert "kept catalog" in home.text
    assert (await client.get(f"{DASH}/scrapers/{scraper.id}")).status_code == 404
    api = await client.get(f"/api/v1/scrapers/{scraper.id}", headers=who.headers)
    assert api.status_code == 404
    async with create_session_factory(db_engine)() as session:
        assert await session.get(Run, run.id) is None
    assert (await client.get(f"/api/v1/scrapers/{kept.id}", headers=who.headers)).status_code == 200


async def test_run_now_from_a_stale_page_shows_the_run_under_way_instead_of_a_refusal(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "write")
    scraper = await make_scraper(db_engine, who.owner)
    await make_run(db_engine, scraper)
    running = await make_run(db_engine, scraper, status=RunStatus.RUNNING)
    token = await sign_in(client, who)
    answer = await client.post(f"{DASH}/scrapers/{scraper.id}/run", data={"csrf_token": token})
    assert answer.status_code == 303
    assert answer.headers["location"] == f"{DASH}/scrapers/{scraper.id}/runs/{running.id}"
    page = await client.get(answer.headers["location"])
    assert "Run #2 is already under way." in page.text
    assert "Not started" not in page.text
    assert ">Stop</button>" in page.text


async def test_another_owners_scraper_run_log_and_downloads_are_404(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    owner = await make_client(db_engine, "admin")
    stranger = await make_client(db_engine, "admin")
    scraper_id, run_id = await _run_with(db_engine, owner.owner, XLSX_ITEMS)
    token = await sign_in(client, stranger)
    base = f"{DASH}/scrapers/{scraper_id}"
    for path in (
        base,
        f"{base}/edit",
        f"{base}/runs/{run_id}",
        f"{base}/runs/{run_id}/live",
        f"{base}/runs/{run_id}/log.txt",
        *[f"{base}/runs/{run_id}/results.{fmt}" for fmt in ("json", "jsonl", "csv", "xlsx")],
    ):
        answer = await client.get(path)
        assert answer.status_code == 404, path
        assert "Mug" not in answer.text
    for action in ("run", "stop", "delete", "edit"):
        answer = await client.post(f"{base}/{action}", data={"csrf_token": token})
        assert answer.status_code == 404, action


async def test_the_run_page_previews_items_and_its_xlsx_matches_the_json_download(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "read")
    scraper_id, run_id = await _run_with(db_engine, who.owner, XLSX_ITEMS)
    await sign_in(client, who)
    base = f"{DASH}/scrapers/{scraper_id}/runs/{run_id}"
    page = await client.get(base)
    assert page.text.count('<td data-label="url">') == len(XLSX_ITEMS)
    assert "&#34;colour&#34;" in page.text or "&quot;colour&quot;" in page.text
    as_json = (await client.get(f"{base}/results.json")).json()
    sheet = load_workbook(io.BytesIO((await client.get(f"{base}/results.xlsx")).content))
    rows = list(sheet["results"].iter_rows(values_only=True))
    assert [row[0] for row in rows[1:]] == [item["url"] for item in as_json]
    assert rows[1][1:3] == (as_json[0]["name"], as_json[0]["price"])


# -- charts: the scrapers table's sparkline, a scraper's pages-and-items chart ------------------


def test_a_sparkline_runs_oldest_to_newest_with_the_most_items_at_the_top() -> None:
    line = sparkline([0, 5, 10], width=100, height=20)
    assert line is not None
    assert line.points == "2.0,18.0 50.0,10.0 98.0,2.0"
    assert line.last == (98.0, 2.0)
    assert line.label == "Items of the last 3 runs, oldest first: 0, 5, 10"


def test_a_scraper_without_runs_has_no_sparkline_and_one_run_draws_a_level_line() -> None:
    assert sparkline([]) is None
    single = sparkline([4], width=100, height=20)
    assert single is not None
    assert single.points == "2.0,2.0 98.0,2.0"


def test_the_run_chart_puts_pages_and_items_on_one_scale_items_dashed() -> None:
    chart = run_chart([("#1", 10, 0), ("#2", 20, 40)], width=200, height=100)
    assert chart is not None
    pages, items = chart.series
    assert chart.top == 40
    assert (pages.name, pages.dashed, items.name, items.dashed) == ("pages", False, "items", True)
    assert pages.points == "24.0,63.0 176.0,50.0"
    assert items.points == "24.0,76.0 176.0,24.0"
    assert [text for _, text in chart.labels] == ["#1", "#2"]
    assert run_chart([]) is None


async def test_the_last_ten_runs_items_of_a_page_of_scrapers_come_from_one_query(
    db_engine: AsyncEngine,
) -> None:
    owner = f"client-{uuid.uuid4().hex[:8]}"
    busy, idle = await make_scraper(db_engine, owner), await make_scraper(db_engine, owner)
    for n in range(12):
        await make_run(db_engine, busy, items=n)
    await make_run(db_engine, busy, status=RunStatus.SKIPPED)
    statements: list[str] = []

    def count(*args: object) -> None:
        statements.append(str(args[2]))

    event.listen(db_engine.sync_engine, "before_cursor_execute", count)
    try:
        async with create_session_factory(db_engine)() as session:
            found = await ScraperRepository(session).recent_items([busy.id, idle.id], 10)
    finally:
        event.remove(db_engine.sync_engine, "before_cursor_execute", count)
    assert found == {busy.id: list(range(2, 12))}  # a skipped firing is not a run of items
    assert len(statements) == 1


async def test_the_scrapers_table_shows_each_scrapers_items_sparkline(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "read")
    scraper = await make_scraper(db_engine, who.owner)
    for n in (3, 1, 4):
        await make_run(db_engine, scraper, items=n)
    await make_scraper(db_engine, who.owner, name="never run")
    await sign_in(client, who)
    page = (await client.get(f"{DASH}/")).text
    assert 'aria-label="Items of the last 3 runs, oldest first: 3, 1, 4"' in page
    assert page.count('class="sparkline"') == 1
    assert "no runs" in page


async def test_a_scrapers_page_offers_stop_only_while_a_run_is_under_way(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "write")
    finished = await make_scraper(db_engine, who.owner)
    await make_run(db_engine, finished, status=RunStatus.COMPLETED)
    running = await make_scraper(db_engine, who.owner)
    await make_run(db_engine, running, status=RunStatus.RUNNING)
    await sign_in(client, who)
    finished_page = (await client.get(f"{DASH}/scrapers/{finished.id}")).text
    running_page = (await client.get(f"{DASH}/scrapers/{running.id}")).text
    assert ">Run now</button>" in finished_page
    assert ">Stop</button>" not in finished_page
    assert ">Stop</button>" in running_page
    # Stop takes Run now's place: a second run could only be refused.
    assert ">Run now</button>" not in running_page


async def test_a_scrapers_page_charts_pages_and_items_of_its_runs(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "read")
    scraper = await make_scraper(db_engine, who.owner)
    runs = [await make_run(db_engine, scraper, items=n) for n in (2, 5)]
    await sign_in(client, who)
    page = (await client.get(f"{DASH}/scrapers/{scraper.id}")).text
    chart = page.split('<div class="run-chart">')[1].split("</p>")[0]
    assert "Pages (solid line, dots) and items (dashed line, rings) of the last 2 runs" in chart
    assert chart.count("<polyline") == 2
    # Labelled by the scraper's own run numbers.
    assert [f">#{run.number}</text>" in chart for run in runs] == [True, True]
    assert [run.number for run in runs] == [1, 2]
    empty = await make_scraper(db_engine, who.owner)
    assert "run-chart" not in (await client.get(f"{DASH}/scrapers/{empty.id}")).text


async def test_a_scrapers_run_history_pages_newest_first_without_duplicates_or_gaps(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "read")
    scraper = await make_scraper(db_engine, who.owner)
    created = [(await make_run(db_engine, scraper)).number for _ in range(45)]  # pages of 20
    await sign_in(client, who)
    seen: list[list[int]] = []
    url: str | None = f"{DASH}/scrapers/{scraper.id}"
    # Bounded: a next link that never ends (a cursor ignored) fails instead of looping.
    while url is not None and len(seen) < 5:
        page = await client.get(url)
        assert page.status_code == 200
        seen.append(
            [int(n) for n in re.findall(r'<td data-label="Run"><a [^>]*>#(\d+)</a>', page.text)]
        )
        following = re.search(r'<a href="([^"]+)" rel="next">Next page</a>', page.text)
        url = html.unescape(following.group(1)) if following else None
    assert [len(ids) for ids in seen] == [20, 20, 5]
    assert [number for numbers in seen for number in numbers] == created[::-1]
    assert created == list(range(1, 46))


# -- editing a scraper through the form ----------------------------------------------------------


async def test_editing_a_scraper_shows_the_apis_refusal_at_the_field_and_changes_nothing(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "write")
    scraper = await make_scraper(db_engine, who.owner, rate_limit=5)
    token = await sign_in(client, who)
    form = await client.get(f"{DASH}/scrapers/{scraper.id}/edit")
    assert 'value="5"' in form.text
    answer = await client.post(
        f"{DASH}/scrapers/{scraper.id}/edit",
        data={**EDIT, "rate_limit": "500", "csrf_token": token},
    )
    assert answer.status_code == 422
    assert 'id="f-rate_limit-error"' in answer.text
    assert "less than or equal to 100" in answer.text
    assert 'value="Renamed"' in answer.text  # what was typed stays
    api = await client.get(f"/api/v1/scrapers/{scraper.id}", headers=who.headers)
    assert (api.json()["name"], api.json()["rate_limit"]) == ("catalog", 5)


async def test_editing_a_scraper_saves_its_fields_and_headers_through_the_service(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "write")
    scraper = await make_scraper(db_engine, who.owner)
    token = await sign_in(client, who)
    answer = await client.post(
        f"{DASH}/scrapers/{scraper.id}/edit", data={**EDIT, "csrf_token": token}
    )
    assert answer.status_code == 303, answer.text
    api = (await client.get(f"/api/v1/scrapers/{scraper.id}", headers=who.headers)).json()
    assert (api["name"], api["rate_limit"], api["max_pages"]) == ("Renamed", 2, 30)
    assert api["headers"] == {"Accept-Language": "fr", "X-Trace": "a:b"}
    assert api["schedule"] == "0 6 * * 1"
    assert "Saved." in (await client.get(answer.headers["location"])).text


async def test_the_form_offers_the_operators_proxy_pools_by_name_only(
    service_settings: Settings, db_engine: AsyncEngine
) -> None:
    pools = {"residential": ["http://user:secret@proxy.example:8080"], "datacenter": []}
    settings = service_settings.model_copy(update={"proxy_pools": pools})
    who = await make_client(db_engine, "write")
    async with serve_app(create_app(settings)) as http:
        await sign_in(http, who)
        form = (await http.get(f"{DASH}/scrapers/new")).text
    options = re.findall(
        r'<option value="([^"]*)"', form.split('id="f-proxy_pool"')[1].split("</select>")[0]
    )
    assert options == ["", "datacenter", "residential"]
    assert "proxy.example" not in form
    assert "secret" not in form


# -- the live run page's request rate -------------------------------------------------------------


def test_the_rate_is_unknown_until_two_samples_span_some_time() -> None:
    meter = RateMeter(window=3.0)
    assert meter.add(10.0, 0) is None
    assert meter.add(10.0, 4) is None


def test_the_rate_is_requests_per_second_over_the_last_window_only() -> None:
    meter = RateMeter(window=3.0)
    meter.add(0.0, 0)
    assert meter.add(1.0, 10) == 10.0  # a fast start ...
    meter.add(2.0, 12)
    meter.add(3.0, 14)
    meter.add(4.0, 16)
    assert meter.add(5.0, 18) == 2.0  # ... forgotten once it left the window


def test_a_finished_run_shows_its_average_rate_of_requests_answered_or_retried() -> None:
    run = Run(scraper_id=1, owner="o", pages_fetched=40, retries=10)
    assert requests_made(run) == 50
    assert average_rate(run, 20.0) == 2.5
    assert average_rate(run, None) is None


async def test_the_live_stream_of_a_run_that_ended_settles_on_its_average_rate(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "read")
    scraper = await make_scraper(db_engine, who.owner, rate_limit=5)
    run = await make_run(db_engine, scraper)
    async with create_session_factory(db_engine)() as session, session.begin():
        stored = await session.get(Run, run.id)
        assert stored is not None
        stored.pages_fetched, stored.retries = 30, 10
        stored.started_at = datetime.now(UTC) - timedelta(seconds=10)
        stored.finished_at = stored.started_at + timedelta(seconds=10)
        session.add(stored)
    await sign_in(client, who)
    stream = await client.get(f"{DASH}/scrapers/{scraper.id}/runs/{run.id}/live")
    assert "event: done" in stream.text
    assert '<meter id="run-rate" min="0" max="5" value="4.0">' in stream.text
    assert '<span id="run-rate-text">4.0</span> of 5 requests/s' in stream.text


# -- the operator's console script --------------------------------------------------------------


@pytest.mark.parametrize("level", ["write", "admin"])  # admin too, as portal-link issues it
async def test_the_dashboard_link_command_prints_a_link_that_signs_in_once(
    service_settings: Settings, client: httpx.AsyncClient, level: str
) -> None:
    owner = f"client-{uuid.uuid4().hex[:8]}"
    env = {
        **os.environ,
        "SCRAPER_MANAGER_DATABASE_URL": service_settings.database_url,
        "SCRAPER_MANAGER_PUBLIC_URL": "https://scrapers.example",
        "SCRAPER_MANAGER_LOG_LEVEL": "WARNING",
    }
    code, out, err = await run_console_script(
        "scraper-manager",
        "dashboard-link",
        "--owner",
        owner,
        "--level",
        level,
        "--ttl-seconds",
        "600",
        env=env,
    )
    assert code == 0, err
    # The link alone on stdout (`LINK=$(...)` holds it); what it is on stderr, as
    # webhook-hub's `portal-link` prints them.
    [url] = out.splitlines()
    said = err.strip().splitlines()[-1]
    assert said.startswith(f"dashboard link for {owner!r} ({level}), usable once until ")
    expires = datetime.fromisoformat(said.rsplit(" ", 1)[1].removesuffix(":"))
    assert timedelta(seconds=590) < expires - datetime.now(UTC) <= timedelta(seconds=600)
    assert url.startswith("https://scrapers.example/dashboard/link/")
    client.cookies.clear()
    first = await open_link(client, httpx.URL(url).path)
    assert first.status_code == 303
    home = await client.get(f"{DASH}/")
    assert owner in home.text
    assert f">{level}<" in home.text
    client.cookies.clear()
    again = await client.get(httpx.URL(url).path)
    assert again.status_code == 410


async def test_the_dashboard_link_command_refuses_the_operator_level() -> None:
    code, _, err = await run_console_script(
        "scraper-manager", "dashboard-link", "--owner", "someone", "--level", "operator"
    )
    assert code == 2
    assert "invalid choice: 'operator'" in err


# -- schedules in words ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("schedule", "words"),
    [
        ("* * * * *", "every minute"),
        ("*/15 * * * *", "every 15 minutes"),
        ("5 * * * *", "every hour at 5 minutes past"),
        ("@hourly", "every hour"),
        ("0 */6 * * *", "every 6 hours"),
        ("30 */2 * * *", "every 2 hours, 30 minutes past"),
        ("0 6 * * *", "every day at 06:00"),
        ("@daily", "every day at 00:00"),
        ("30 7 * * 1-5", "every weekday at 07:30"),
        ("0 9 * * 1", "every Monday at 09:00"),
        ("0 9 * * 1,3,5", "every Monday, Wednesday and Friday at 09:00"),
        ("0 0 * * 7", "every Sunday at 00:00"),
        ("15 3 1 * *", "on the 1st of every month at 03:15"),
        ("0 12 22 * *", "on the 22nd of every month at 12:00"),
    ],
)
def test_a_usual_schedule_is_said_in_words(schedule: str, words: str) -> None:
    assert describe(schedule) == words


@pytest.mark.parametrize(
    "schedule", ["0 6 * 1 *", "0-30 6 * * *", "0 6 1 * 1", "*/5 6 * * *", "0 6 * * 1-3", "x"]
)
def test_an_unusual_schedule_is_left_as_its_expression(schedule: str) -> None:
    assert describe(schedule) is None


async def test_the_scrapers_table_says_the_schedule_in_words_with_its_next_firing_locally(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "read")
    token_owner = await make_client(db_engine, "write", owner=who.owner)
    made = await client.post(
        "/api/v1/scrapers",
        json={
            "name": "morning",
            "url": "http://127.0.0.1:9/",
            "schedule": "30 7 * * 1-5",
            "timezone": "Asia/Tokyo",
        },
        headers=token_owner.headers,
    )
    assert made.status_code == 201, made.text
    await sign_in(client, who)
    page = (await client.get(f"{DASH}/")).text
    assert "every weekday at 07:30" in page
    assert re.search(r"\d{4}-\d\d-\d\d 07:30 Asia/Tokyo", page)
