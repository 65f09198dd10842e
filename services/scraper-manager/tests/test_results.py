"""GET /scrapers/{id}/results: a run's items in crawl order by default (oldest first, as a
dataset is read and exported), newest first with `order=desc`; either way the cursor walks
every item exactly once."""

from __future__ import annotations

from typing import Any

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.factories import Client, make_client, make_run, make_scraper

BASE = "/api/v1/scrapers"


async def walk(client: httpx.AsyncClient, who: Client, scraper_id: int, **params: Any) -> list[int]:
    """Every item's `n` over all pages, following next_cursor."""
    seen: list[int] = []
    cursor: str | None = None
    while True:
        query = {**params, **({"cursor": cursor} if cursor else {})}
        response = await client.get(
            f"{BASE}/{scraper_id}/results", params=query, headers=who.headers
        )
        assert response.status_code == 200, response.text
        page = response.json()
        seen.extend(item["data"]["n"] for item in page["data"])
        cursor = page["next_cursor"]
        if cursor is None:
            return seen


async def test_results_come_in_crawl_order_by_default(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "read")
    scraper = await make_scraper(db_engine, who.owner)
    await make_run(db_engine, scraper, items=7)
    assert await walk(client, who, scraper.id, limit=3) == [0, 1, 2, 3, 4, 5, 6]


async def test_order_desc_gives_the_newest_items_first_and_pages_through_all(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "read")
    scraper = await make_scraper(db_engine, who.owner)
    await make_run(db_engine, scraper, items=7)
    assert await walk(client, who, scraper.id, limit=3, order="desc") == [6, 5, 4, 3, 2, 1, 0]


async def test_results_are_of_the_latest_run_unless_one_is_named(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "read")
    scraper = await make_scraper(db_engine, who.owner)
    first = await make_run(db_engine, scraper, items=2)
    await make_run(db_engine, scraper, items=5)
    assert await walk(client, who, scraper.id) == [0, 1, 2, 3, 4]
    assert await walk(client, who, scraper.id, run_id=first.id) == [0, 1]


async def test_an_unknown_order_is_422(client: httpx.AsyncClient, db_engine: AsyncEngine) -> None:
    who = await make_client(db_engine, "read")
    scraper = await make_scraper(db_engine, who.owner)
    response = await client.get(
        f"{BASE}/{scraper.id}/results", params={"order": "random"}, headers=who.headers
    )
    assert response.status_code == 422
    assert response.json()["code"] == "validation_error"
