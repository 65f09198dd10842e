"""The scrapers list: found by a part of the name or start URL and by status, an empty
filter field being no filter; each row runs or stops its scraper."""

from __future__ import annotations

import re

import httpx
from scraper_manager.dashboard.pages import status_filter
from scraper_manager.models import RunStatus, ScraperStatus
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.dashboard import DASH, sign_in
from tests.factories import make_client, make_run, make_scraper


def names(html: str) -> list[str]:
    return re.findall(r'<td data-label="Name"[^>]*><a [^>]*>([^<]*)</a>', html)


def test_an_empty_or_unknown_status_is_no_filter() -> None:
    assert status_filter("") is None
    assert status_filter("sleeping") is None
    assert status_filter("running") is ScraperStatus.RUNNING


async def test_the_list_finds_scrapers_by_a_part_of_their_name_or_url_in_any_case(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "read")
    await make_scraper(db_engine, who.owner, name="Shoe prices")
    await make_scraper(db_engine, who.owner, name="news", url="http://127.0.0.1:9/shoes")
    await make_scraper(db_engine, who.owner, name="100% cotton")
    await make_scraper(db_engine, who.owner, name="other")
    await sign_in(client, who)
    found = await client.get(f"{DASH}/", params={"q": "SHOE", "status": ""})
    assert found.status_code == 200
    assert names(found.text) == ["news", "Shoe prices"]
    # % and _ are themselves, not wildcards.
    assert names((await client.get(f"{DASH}/", params={"q": "0%"})).text) == ["100% cotton"]
    assert names((await client.get(f"{DASH}/", params={"q": "o_h"})).text) == []
    assert 'value="SHOE"' in found.text  # the filter as typed stays in its field
    none = await client.get(f"{DASH}/", params={"q": "nothing like it"})
    assert "No scrapers match" in none.text


async def test_the_list_filters_by_status_and_each_row_offers_run_or_stop(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "write")
    idle = await make_scraper(db_engine, who.owner, name="idle one")
    busy = await make_scraper(db_engine, who.owner, name="busy one")
    await make_run(db_engine, busy, status=RunStatus.RUNNING)
    await sign_in(client, who)
    running = (await client.get(f"{DASH}/", params={"status": "running"})).text
    assert names(running) == ["busy one"]
    everything = (await client.get(f"{DASH}/")).text
    assert f'action="{DASH}/scrapers/{busy.id}/stop"' in everything
    assert f'action="{DASH}/scrapers/{busy.id}/run"' not in everything
    assert f'action="{DASH}/scrapers/{idle.id}/run"' in everything
    assert 'aria-label="Run now: idle one">Run now</button>' in everything


async def test_a_read_session_lists_no_run_or_stop_control(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "read")
    scraper = await make_scraper(db_engine, who.owner)
    await sign_in(client, who)
    page = (await client.get(f"{DASH}/")).text
    assert f"/scrapers/{scraper.id}/run" not in page
