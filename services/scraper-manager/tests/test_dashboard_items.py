"""A run's items on the dashboard: the preview cuts values to one line and links each item
to its own page, which shows it in full; ids of another run or owner are 404. And the
run's answers by status code."""

from __future__ import annotations

import html
import re

import httpx
from scraper_manager.dashboard.live import status_breakdown
from scraper_manager.dashboard.pages import short_url
from scraper_manager.models import Item, Run
from servicekit.db.engine import create_session_factory
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlmodel import select

from tests.dashboard import DASH, sign_in
from tests.factories import make_client, make_run, make_scraper


def test_a_cut_short_url_shows_its_path_and_query_where_items_differ() -> None:
    assert short_url("https://shop.example/p/7?color=red") == "/p/7?color=red"
    assert short_url("https://shop.example/") == "https://shop.example/"
    assert short_url("https://shop.example") == "https://shop.example"


async def test_each_previewed_item_links_to_its_page_which_shows_every_field_in_full(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "read")
    scraper = await make_scraper(db_engine, who.owner)
    run = await make_run(db_engine, scraper)
    long_text = "word " * 300
    async with create_session_factory(db_engine)() as session, session.begin():
        item = Item(
            run_id=run.id,
            scraper_id=scraper.id,
            url="https://shop.example/p/1",
            data={"title": "Mug", "description": long_text, "sizes": [1, 2]},
        )
        session.add(item)
    await sign_in(client, who)
    base = f"{DASH}/scrapers/{scraper.id}/runs/{run.id}"
    preview = (await client.get(base)).text
    assert f'href="{base}/items/{item.id}" title="https://shop.example/p/1">/p/1</a>' in preview
    page = await client.get(f"{base}/items/{item.id}")
    assert page.status_code == 200
    assert long_text.strip() in page.text
    assert "[\n  1,\n  2\n]" in page.text  # nested values as indented JSON
    assert 'data-copy="item-url"' in page.text


async def test_an_item_of_another_run_or_another_owner_is_404(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "read")
    scraper = await make_scraper(db_engine, who.owner)
    mine, other = await make_run(db_engine, scraper), await make_run(db_engine, scraper, items=1)
    theirs_scraper = await make_scraper(db_engine, "someone-else")
    theirs = await make_run(db_engine, theirs_scraper, items=1)
    async with create_session_factory(db_engine)() as session:
        other_item = (await session.exec(select(Item).where(Item.run_id == other.id))).one()
    await sign_in(client, who)
    wrong_run = await client.get(
        f"{DASH}/scrapers/{scraper.id}/runs/{mine.id}/items/{other_item.id}"
    )
    assert wrong_run.status_code == 404
    not_mine = await client.get(
        f"{DASH}/scrapers/{theirs_scraper.id}/runs/{theirs.id}/items/{other_item.id}"
    )
    assert not_mine.status_code == 404


def test_answers_by_status_code_are_in_code_order_with_their_share_and_meaning() -> None:
    shares = status_breakdown({"503": 1, "200": 6, "robots_denied": 1, "404": 0, "x": "many"})
    assert [(s.code, s.answers, s.percent, s.kind) for s in shares] == [
        ("200", 6, 75.0, "success"),
        ("503", 1, 12.5, "server error"),
        ("robots_denied", 1, 12.5, "not fetched: robots.txt"),
    ]
    assert status_breakdown({}) == []


def test_a_304_is_labelled_not_modified_and_other_3xx_redirect() -> None:
    shares = status_breakdown({"304": 3, "301": 1})
    assert [(s.code, s.kind) for s in shares] == [("301", "redirect"), ("304", "not modified")]


async def test_the_run_page_breaks_its_answers_down_by_status_code(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "read")
    scraper = await make_scraper(db_engine, who.owner)
    run = await make_run(db_engine, scraper)
    async with create_session_factory(db_engine)() as session, session.begin():
        stored = await session.get(Run, run.id)
        assert stored is not None
        stored.status_counts = {"200": 3, "404": 1}
        session.add(stored)
    await sign_in(client, who)
    page = (await client.get(f"{DASH}/scrapers/{scraper.id}/runs/{run.id}")).text
    table = page.split('id="run-status-codes"')[1].split("</table>")[0]
    assert "<caption>Answers by status code</caption>" in table
    assert re.findall(r'badge-\w+">(\d+)</span> ([a-z ]+)</span></td>', table) == [
        ("200", "success"),
        ("404", "client error"),
    ]
    assert '<meter min="0" max="100" value="75.0"' in table


def item_links(html: str) -> list[str]:
    return re.findall(r'<a class="clip" href="[^"]*/items/\d+" title="[^"]*">([^<]*)</a>', html)


async def test_the_item_browser_pages_past_the_first_fifty_in_crawl_order(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "read")
    scraper = await make_scraper(db_engine, who.owner)
    run = await make_run(db_engine, scraper, items=120)
    await sign_in(client, who)
    seen: list[str] = []
    url: str | None = f"{DASH}/scrapers/{scraper.id}/runs/{run.id}/items"
    while url is not None and len(seen) < 200:
        page = await client.get(url)
        assert page.status_code == 200
        seen += item_links(page.text)
        following = re.search(r'<a href="([^"]+)" rel="next">Next page</a>', page.text)
        url = html.unescape(following.group(1)) if following else None
    assert seen == [f"/page-{n}" for n in range(120)]


async def test_the_item_browser_finds_items_by_a_part_of_their_url_or_a_value(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "read")
    scraper = await make_scraper(db_engine, who.owner)
    run = await make_run(db_engine, scraper)
    async with create_session_factory(db_engine)() as session, session.begin():
        session.add_all(
            Item(run_id=run.id, scraper_id=scraper.id, url=url, data=data)
            for url, data in (
                ("https://shop.example/mugs/1", {"title": "Blue mug", "price": "12"}),
                ("https://shop.example/cups/2", {"title": "Red cup", "note": "50% off"}),
                ("https://shop.example/plates/3", {"title": "Plate"}),
            )
        )
    await sign_in(client, who)
    base = f"{DASH}/scrapers/{scraper.id}/runs/{run.id}/items"
    by_value = (await client.get(base, params={"q": "MUG"})).text
    assert item_links(by_value) == ["/mugs/1"]
    assert 'value="MUG"' in by_value
    assert item_links((await client.get(base, params={"q": "plates/"})).text) == ["/plates/3"]
    # % is itself: "0%" finds the "50% off" only, not every value with a 0 in it.
    assert item_links((await client.get(base, params={"q": "0%"})).text) == ["/cups/2"]
    assert "No items match" in (await client.get(base, params={"q": "nothing"})).text
