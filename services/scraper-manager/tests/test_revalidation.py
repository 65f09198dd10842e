"""Incremental crawls through the real worker against a shop on loopback that answers 304 to
validators: the second run sends `If-None-Match` / `If-Modified-Since`, reuses each unchanged
page's items and links without its body, and counts them; `revalidate: false` turns it off."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from scraper_manager.crawler.engine import CachedItems
from scraper_manager.crawler.revalidation import (
    Validators,
    conditional_headers,
    extraction_fingerprint,
    validator,
)
from scraper_manager.models import RunStatus
from scraper_manager.runner import write_items
from scraper_manager.settings import Settings
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.catalog import Catalog
from tests.factories import make_client, make_run, make_scraper
from tests.test_changes import BASE, SHOP, crawl, create


@pytest.fixture
async def catalog() -> AsyncIterator[Catalog]:
    # Three linked pages: /shop/1 and /shop/2 are reached only through links of earlier pages.
    shop = Catalog(pages={0: {"A": "1.00"}, 1: {"B": "2.00"}, 2: {"C": "3.00"}})
    await shop.start()
    yield shop
    await shop.stop()


def items_of(results: dict[str, Any]) -> list[tuple[str, str, str]]:
    return sorted((i["url"], i["data"]["sku"], i["data"]["price"]) for i in results["data"])


async def results(client: httpx.AsyncClient, headers: dict[str, str], sid: int, rid: int) -> Any:
    response = await client.get(f"{BASE}/{sid}/results?run_id={rid}", headers=headers)
    return response.json()


async def test_an_unchanged_site_answers_304_and_its_items_and_links_are_reused(
    worker: Settings, client: httpx.AsyncClient, db_engine: AsyncEngine, catalog: Catalog
) -> None:
    who = await make_client(db_engine, "write")
    scraper = await create(client, who, url=catalog.url, **SHOP)
    first = await crawl(client, who, scraper["id"])
    catalog.requests.clear()
    second = await crawl(client, who, scraper["id"])
    # Every page was asked conditionally and answered 304: no page body came...
    assert [(path, status) for path, _, _, status in catalog.requests] == [
        ("/shop/0", 304),
        ("/shop/1", 304),
        ("/shop/2", 304),
    ]
    assert all(etag and since for _, etag, since, _ in catalog.requests)
    # ... and yet /shop/1 and /shop/2 were reached (their links came from storage) and every
    # item was collected again.
    assert second["stats"]["not_modified"] == 3
    assert second["stats"]["bytes"] == 0
    assert second["stats"]["status_counts"] == {"304": 3}
    assert second["items_collected"] == first["items_collected"] == 3
    assert items_of(await results(client, who.headers, scraper["id"], second["id"])) == items_of(
        await results(client, who.headers, scraper["id"], first["id"])
    )
    log = await client.get(f"{BASE}/{scraper['id']}/runs/{second['id']}/log", headers=who.headers)
    [line] = [x for x in log.json()["data"] if x["message"].startswith("pages not modified")]
    assert line["fields"] == {"pages": 3, "items": 3}


async def test_a_changed_page_is_fetched_whole_and_its_new_items_are_collected(
    worker: Settings, client: httpx.AsyncClient, db_engine: AsyncEngine, catalog: Catalog
) -> None:
    who = await make_client(db_engine, "write")
    scraper = await create(client, who, url=catalog.url, **SHOP)
    await crawl(client, who, scraper["id"])
    catalog.pages[1] = {"B": "2.50"}
    catalog.requests.clear()
    second = await crawl(client, who, scraper["id"])
    assert [(path, status) for path, _, _, status in catalog.requests] == [
        ("/shop/0", 304),
        ("/shop/1", 200),
        ("/shop/2", 304),
    ]
    assert second["stats"]["not_modified"] == 2
    assert second["stats"]["changes"]["changed"] == 1
    prices = {
        sku: price
        for _, sku, price in items_of(
            await results(client, who.headers, scraper["id"], second["id"])
        )
    }
    assert prices == {"A": "1.00", "B": "2.50", "C": "3.00"}


async def test_a_site_with_last_modified_only_is_revalidated_by_date(
    worker: Settings, client: httpx.AsyncClient, db_engine: AsyncEngine, catalog: Catalog
) -> None:
    catalog.etags = False
    who = await make_client(db_engine, "write")
    scraper = await create(client, who, url=catalog.url, **SHOP)
    await crawl(client, who, scraper["id"])
    catalog.requests.clear()
    second = await crawl(client, who, scraper["id"])
    assert [(etag, status) for _, etag, _, status in catalog.requests] == [(None, 304)] * 3
    assert second["stats"]["not_modified"] == 3
    catalog.touch()  # every page newer than the date the last run saw
    catalog.requests.clear()
    third = await crawl(client, who, scraper["id"])
    assert {status for *_, status in catalog.requests} == {200}
    assert third["stats"]["not_modified"] == 0


async def test_revalidate_false_sends_no_validators(
    worker: Settings, client: httpx.AsyncClient, db_engine: AsyncEngine, catalog: Catalog
) -> None:
    who = await make_client(db_engine, "write")
    scraper = await create(client, who, url=catalog.url, revalidate=False, **SHOP)
    assert scraper["revalidate"] is False
    await crawl(client, who, scraper["id"])
    catalog.requests.clear()
    second = await crawl(client, who, scraper["id"])
    assert [(etag, since, status) for _, etag, since, status in catalog.requests] == [
        (None, None, 200)
    ] * 3
    assert second["stats"]["not_modified"] == 0


async def test_new_selectors_fetch_every_page_whole_once(
    worker: Settings, client: httpx.AsyncClient, db_engine: AsyncEngine, catalog: Catalog
) -> None:
    who = await make_client(db_engine, "write")
    scraper = await create(client, who, url=catalog.url, **SHOP)
    await crawl(client, who, scraper["id"])
    patched = await client.patch(
        f"{BASE}/{scraper['id']}",
        json={"selectors": {"sku": "span.sku::text", "cost": "span.price::text"}},
        headers=who.headers,
    )
    assert patched.status_code == 200, patched.text
    catalog.requests.clear()
    second = await crawl(client, who, scraper["id"])
    # The stored items were extracted by other selectors: not reused, no validators sent.
    assert {(etag, status) for _, etag, _, status in catalog.requests} == {(None, 200)}
    found = await results(client, who.headers, scraper["id"], second["id"])
    assert {i["data"]["cost"] for i in found["data"]} == {"1.00", "2.00", "3.00"}


async def test_pages_stored_at_the_depth_limit_are_fetched_whole_when_their_links_are_needed(
    worker: Settings, client: httpx.AsyncClient, db_engine: AsyncEngine, catalog: Catalog
) -> None:
    who = await make_client(db_engine, "write")
    scraper = await create(client, who, url=catalog.url, max_depth=1, **SHOP)
    await crawl(client, who, scraper["id"])  # /shop/1 stored without its links
    await client.patch(f"{BASE}/{scraper['id']}", json={"max_depth": None}, headers=who.headers)
    catalog.requests.clear()
    second = await crawl(client, who, scraper["id"])
    assert [(path, status) for path, _, _, status in catalog.requests] == [
        ("/shop/0", 304),
        ("/shop/1", 200),
        ("/shop/2", 200),
    ]
    assert second["items_collected"] == 3


# -- the pure parts ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("header", "kept"),
    [
        ('"abc"', '"abc"'),
        (' W/"abc" ', 'W/"abc"'),
        ("Sun, 22 Nov 2026 10:00:00 GMT", "Sun, 22 Nov 2026 10:00:00 GMT"),
        (None, None),
        ("", None),
        ("caf\u00e9", None),
        ("a\x00b", None),
        ("x" * 513, None),
    ],
)
def test_only_a_printable_bounded_validator_is_sent_back(
    header: str | None, kept: str | None
) -> None:
    assert validator(header) == kept


def test_conditional_headers_carry_the_validators_there_are() -> None:
    assert conditional_headers(None) == {}
    assert conditional_headers(Validators('"e"', None, True)) == {"If-None-Match": '"e"'}
    assert conditional_headers(Validators(None, "Sun, 22 Nov 2026", True)) == {
        "If-Modified-Since": "Sun, 22 Nov 2026"
    }


def test_the_fingerprint_follows_what_extraction_depends_on() -> None:
    base = extraction_fingerprint({"a": "h1"}, None, None)
    assert base == extraction_fingerprint({"a": "h1"}, None, None)
    assert base != extraction_fingerprint({"a": "h2"}, None, None)
    assert base != extraction_fingerprint({"a": "h1"}, "div", None)
    assert base != extraction_fingerprint({"a": "h1"}, None, "a.next")


# --- a 304's items, copied where the run's items are written ------------------------------


async def stored_page(
    engine: AsyncEngine, scraper_id: int, url: str, items: list[dict[str, Any]], fp: str
) -> None:
    async with engine.begin() as connection:
        await connection.execute(
            text(
                "INSERT INTO page_cache (scraper_id, url, page_url, fingerprint, etag, items,"
                " links, seen_at) VALUES (:s, :url, :url, :fp, '\"e\"', CAST(:items AS jsonb),"
                " '[]', now() - interval '1 day')"
            ),
            {"s": scraper_id, "url": url, "fp": fp, "items": json.dumps(items)},
        )


async def test_a_304s_stored_items_are_copied_in_sql_in_crawl_order_and_counted(
    db_engine: AsyncEngine,
) -> None:
    """Two runs written at once (as the heartbeat writes them): extracted items and pages
    answered 304 interleaved; each 304 page's stored items land in its place, under its
    stored URL, its row is marked seen, and each run's count is what was written."""
    one = await make_scraper(db_engine, "reval", name="one")
    two = await make_scraper(db_engine, "reval", name="two")
    run_one = await make_run(db_engine, one, status=RunStatus.RUNNING)
    run_two = await make_run(db_engine, two, status=RunStatus.RUNNING)
    await stored_page(db_engine, one.id, "http://s/a", [{"n": "a1"}, {"n": "a2"}], "fp1")
    await stored_page(db_engine, two.id, "http://s/b", [{"n": "b1"}], "fp2")
    async with db_engine.begin() as connection:
        written = await write_items(
            connection,
            [
                (
                    run_one.id,
                    one.id,
                    [
                        ("http://s/x", {"n": "x"}),
                        CachedItems("http://s/a", "fp1", 2),
                        ("http://s/y", {"n": "y"}),
                    ],
                ),
                (run_two.id, two.id, [CachedItems("http://s/b", "fp2", 1)]),
            ],
        )
        rows = (
            await connection.execute(
                text(
                    "SELECT run_id, url, data->>'n' FROM items"
                    " WHERE run_id = ANY(:runs) ORDER BY id"
                ),
                {"runs": [run_one.id, run_two.id]},
            )
        ).all()
        seen = (
            await connection.execute(
                text(
                    "SELECT count(*) FROM page_cache"
                    " WHERE scraper_id = ANY(:s) AND seen_at > now() - interval '1 hour'"
                ),
                {"s": [one.id, two.id]},
            )
        ).scalar_one()
    assert [tuple(row) for row in rows] == [
        (run_one.id, "http://s/x", "x"),
        (run_one.id, "http://s/a", "a1"),
        (run_one.id, "http://s/a", "a2"),
        (run_one.id, "http://s/y", "y"),
        (run_two.id, "http://s/b", "b1"),
    ]
    assert written == {run_one.id: (4, 4), run_two.id: (1, 1)}
    assert seen == 2


async def test_a_304_page_stored_by_another_extraction_gives_no_items_but_is_marked_seen(
    db_engine: AsyncEngine,
) -> None:
    """Its row was replaced (the scraper's selectors changed) after the run read it: what
    another extraction gave is not this run's items."""
    scraper = await make_scraper(db_engine, "reval", name="changed")
    run = await make_run(db_engine, scraper, status=RunStatus.RUNNING)
    await stored_page(db_engine, scraper.id, "http://s/a", [{"n": "new"}], "other")
    async with db_engine.begin() as connection:
        written = await write_items(
            connection, [(run.id, scraper.id, [CachedItems("http://s/a", "fp1", 1)])]
        )
        items = await connection.scalar(
            text("SELECT count(*) FROM items WHERE run_id = :r"), {"r": run.id}
        )
        seen = await connection.scalar(
            text(
                "SELECT seen_at > now() - interval '1 hour' FROM page_cache WHERE scraper_id = :s"
            ),
            {"s": scraper.id},
        )
    assert written == {}
    assert items == 0
    assert seen is True
