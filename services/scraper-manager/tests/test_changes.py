"""Change detection: a scraper's `item_key`, each successful run compared with the previous
successful one (added, removed, changed fields), through the real worker against a shop on
loopback whose products the tests change; the diff itself on stored items (duplicates,
items without a key); the changes API, its exports and its events."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from openpyxl import load_workbook
from scraper_manager.models import Item, Run, RunStatus
from scraper_manager.runs.changes import detect_changes
from scraper_manager.settings import Settings
from servicekit.db.engine import create_session_factory
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.catalog import Catalog
from tests.factories import Client, make_client, make_scraper, scraper_body
from tests.test_crawls import wait_for_status

BASE = "/api/v1/scrapers"
SHOP = {
    "item_selector": "div.product",
    "selectors": {"sku": "span.sku::text", "price": "span.price::text"},
    "item_key": "sku",
    "rate_limit": 100,
}


@pytest.fixture
async def catalog() -> AsyncIterator[Catalog]:
    shop = Catalog(pages={0: {"A": "1.00", "B": "2.00"}, 1: {"C": "3.00"}})
    await shop.start()
    yield shop
    await shop.stop()


async def create(client: httpx.AsyncClient, who: Client, **body: Any) -> dict[str, Any]:
    response = await client.post(BASE, json=scraper_body(**body), headers=who.headers)
    assert response.status_code == 201, response.text
    return dict(response.json())


async def crawl(client: httpx.AsyncClient, who: Client, scraper_id: int) -> dict[str, Any]:
    started = await client.post(f"{BASE}/{scraper_id}/run", headers=who.headers)
    assert started.status_code == 202, started.text
    run = await wait_for_status(
        client, who, scraper_id, started.json()["run_id"], {"completed", "failed", "stopped"}
    )
    assert run["status"] == "completed", run
    return run


async def changes_of(
    client: httpx.AsyncClient, who: Client, scraper_id: int, run_id: int, query: str = ""
) -> dict[str, Any]:
    response = await client.get(
        f"{BASE}/{scraper_id}/runs/{run_id}/changes{query}", headers=who.headers
    )
    assert response.status_code == 200, response.text
    return dict(response.json())


async def two_runs(
    client: httpx.AsyncClient, who: Client, catalog: Catalog
) -> tuple[int, dict[str, Any], dict[str, Any]]:
    """A first crawl; then A's price changes, B goes and D comes; a second crawl."""
    scraper = await create(client, who, url=catalog.url, **SHOP)
    first = await crawl(client, who, scraper["id"])
    catalog.pages[0] = {"A": "1.50", "D": "4.00"}
    second = await crawl(client, who, scraper["id"])
    return scraper["id"], first, second


# -- item_key --------------------------------------------------------------------------------


async def test_an_item_key_that_is_not_a_field_of_the_scraper_is_422_naming_it(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "write")
    response = await client.post(
        BASE,
        json=scraper_body(selectors={"sku": "span.sku::text"}, item_key="ean"),
        headers=who.headers,
    )
    assert response.status_code == 422
    assert "item_key 'ean'" in response.json()["error"]
    assert "sku" in response.json()["error"]


async def test_url_and_the_page_items_fields_are_item_keys(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "write")
    assert (await create(client, who, item_key="url"))["item_key"] == "url"
    assert (await create(client, who, item_key="title"))["item_key"] == "title"
    keyed = await create(client, who, selectors={"sku": "span.sku::text"}, item_key="url")
    assert keyed["item_key"] == "url"


async def test_a_patch_whose_selectors_drop_the_key_field_is_422_and_changes_nothing(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "write")
    scraper = await create(client, who, selectors={"sku": "span.sku::text"}, item_key="sku")
    patched = await client.patch(
        f"{BASE}/{scraper['id']}", json={"selectors": {"name": "h2::text"}}, headers=who.headers
    )
    assert patched.status_code == 422
    assert "item_key 'sku'" in patched.json()["error"]
    kept = (await client.get(f"{BASE}/{scraper['id']}", headers=who.headers)).json()
    assert kept["selectors"] == {"sku": "span.sku::text"}
    cleared = await client.patch(
        f"{BASE}/{scraper['id']}", json={"item_key": None}, headers=who.headers
    )
    assert cleared.json()["item_key"] is None


# -- runs compared, through the worker -------------------------------------------------------


async def test_the_first_run_with_a_key_is_the_baseline_without_changes(
    worker: Settings, client: httpx.AsyncClient, db_engine: AsyncEngine, catalog: Catalog
) -> None:
    who = await make_client(db_engine, "write")
    scraper = await create(client, who, url=catalog.url, **SHOP)
    run = await crawl(client, who, scraper["id"])
    assert run["stats"]["changes"] == {
        "compared_run_id": None,
        "added": 0,
        "removed": 0,
        "changed": 0,
        "duplicates": 0,
        "unkeyed": 0,
    }
    listed = await changes_of(client, who, scraper["id"], run["id"])
    assert listed["data"] == []
    assert listed["changes"]["compared_run_id"] is None


async def test_a_second_run_reports_what_was_added_removed_and_changed(
    worker: Settings, client: httpx.AsyncClient, db_engine: AsyncEngine, catalog: Catalog
) -> None:
    who = await make_client(db_engine, "write")
    scraper_id, first, second = await two_runs(client, who, catalog)
    counts = second["stats"]["changes"]
    assert counts["compared_run_id"] == first["id"]
    assert (counts["added"], counts["removed"], counts["changed"]) == (1, 1, 1)
    listed = await changes_of(client, who, scraper_id, second["id"])
    by_key = {change["key"]: change for change in listed["data"]}
    assert by_key["D"]["kind"] == "added"
    assert by_key["D"]["item"]["price"] == "4.00"
    assert by_key["D"]["fields"] is None
    assert by_key["B"]["kind"] == "removed"
    assert by_key["B"]["item"]["price"] == "2.00"
    assert by_key["A"]["kind"] == "changed"
    # Exactly the fields that differ: not sku, not url.
    assert by_key["A"]["fields"] == {"price": {"old": "1.00", "new": "1.50"}}
    assert by_key["A"]["item"]["price"] == "1.50"
    assert "C" not in by_key  # unchanged


async def test_changes_of_one_kind_are_keyset_paged(
    worker: Settings, client: httpx.AsyncClient, db_engine: AsyncEngine, catalog: Catalog
) -> None:
    who = await make_client(db_engine, "write")
    scraper_id, _, second = await two_runs(client, who, catalog)
    only = await changes_of(client, who, scraper_id, second["id"], "?kind=removed")
    assert [(c["kind"], c["key"]) for c in only["data"]] == [("removed", "B")]
    seen: list[str] = []
    query = "?limit=1"
    while True:
        page = await changes_of(client, who, scraper_id, second["id"], query)
        seen += [c["key"] for c in page["data"]]
        if page["next_cursor"] is None:
            break
        query = f"?limit=1&cursor={page['next_cursor']}"
    assert seen == ["A", "B", "D"]  # key order, each once


async def test_a_bad_kind_is_422_and_another_owners_run_is_404(
    worker: Settings, client: httpx.AsyncClient, db_engine: AsyncEngine, catalog: Catalog
) -> None:
    who = await make_client(db_engine, "write")
    scraper = await create(client, who, url=catalog.url, **SHOP)
    run = await crawl(client, who, scraper["id"])
    path = f"{BASE}/{scraper['id']}/runs/{run['id']}/changes"
    bad = await client.get(f"{path}?kind=moved", headers=who.headers)
    assert bad.status_code == 422
    assert "kind" in bad.json()["error"]
    stranger = await make_client(db_engine, "read")
    assert (await client.get(path, headers=stranger.headers)).status_code == 404
    other = await create(client, who, url=catalog.url, **SHOP)
    wrong = f"{BASE}/{other['id']}/runs/{run['id']}/changes"
    assert (await client.get(wrong, headers=who.headers)).status_code == 404


async def test_a_scraper_without_a_key_keeps_todays_runs(
    worker: Settings, client: httpx.AsyncClient, db_engine: AsyncEngine, catalog: Catalog
) -> None:
    who = await make_client(db_engine, "write")
    scraper = await create(client, who, url=catalog.url, **{**SHOP, "item_key": None})
    await crawl(client, who, scraper["id"])
    catalog.pages[0] = {"Z": "9.00"}
    second = await crawl(client, who, scraper["id"])
    assert second["stats"]["changes"] is None
    listed = await changes_of(client, who, scraper["id"], second["id"])
    assert listed["changes"] is None
    assert listed["data"] == []


async def test_the_counts_are_in_run_completed_and_the_changes_in_run_items_changed(
    worker: Settings, client: httpx.AsyncClient, db_engine: AsyncEngine, catalog: Catalog
) -> None:
    who = await make_client(db_engine, "write")
    _, first, second = await two_runs(client, who, catalog)
    async with db_engine.connect() as connection:
        rows = (
            await connection.execute(
                text(
                    "SELECT type, tenant, data FROM outbox_events"
                    " WHERE (data->>'run_id')::int = ANY(:runs) ORDER BY seq"
                ),
                {"runs": [first["id"], second["id"]]},
            )
        ).all()
    events = [(kind, data) for kind, tenant, data in rows if tenant == who.owner]
    completed = [data for kind, data in events if kind == "run.completed"]
    assert completed[0]["changes"]["compared_run_id"] is None
    assert completed[1]["changes"]["added"] == 1
    [changed] = [data for kind, data in events if kind == "run.items_changed"]
    assert changed["run_id"] == second["id"]
    assert changed["compared_run_id"] == first["id"]
    assert (changed["added"], changed["removed"], changed["changed"]) == (1, 1, 1)
    assert [c["key"] for c in changed["changes"]] == ["A", "B", "D"]
    assert changed["changes"][0]["fields"] == {"price": {"old": "1.00", "new": "1.50"}}
    assert changed["more"] is False


# `json` is the paged answer above, as for the results; the dashboard downloads a JSON array.
@pytest.mark.parametrize("format", ["csv", "jsonl", "xlsx"])
async def test_the_changes_download_in_every_format(
    worker: Settings,
    client: httpx.AsyncClient,
    db_engine: AsyncEngine,
    catalog: Catalog,
    format: str,
) -> None:
    who = await make_client(db_engine, "write")
    scraper_id, _, second = await two_runs(client, who, catalog)
    response = await client.get(
        f"{BASE}/{scraper_id}/runs/{second['id']}/changes?format={format}", headers=who.headers
    )
    assert response.status_code == 200
    assert "attachment" in response.headers["content-disposition"]
    if format in {"json", "jsonl"}:
        records = (
            json.loads(response.text)
            if format == "json"
            else [json.loads(line) for line in response.text.splitlines()]
        )
        assert [(r["kind"], r["key"]) for r in records] == [
            ("changed", "A"),
            ("removed", "B"),
            ("added", "D"),
        ]
        assert records[0]["fields"] == {"price": {"old": "1.00", "new": "1.50"}}
        return
    if format == "csv":
        rows = list(csv.reader(io.StringIO(response.text)))
    else:
        sheet = load_workbook(io.BytesIO(response.content), read_only=True)["changes"]
        rows = [
            ["" if v is None else str(v) for v in row] for row in sheet.iter_rows(values_only=True)
        ]
    assert rows[0] == ["change_kind", "change_key", "change_fields", "url", "sku", "price"]
    assert [row[:2] for row in rows[1:]] == [["changed", "A"], ["removed", "B"], ["added", "D"]]
    assert json.loads(rows[1][2]) == {"price": {"old": "1.00", "new": "1.50"}}
    assert rows[3][5] == "4.00"


# -- the diff on stored items ----------------------------------------------------------------


async def stored_run(engine: AsyncEngine, scraper_id: int, owner: str, items: list[Any]) -> int:
    async with create_session_factory(engine)() as session, session.begin():
        run = Run(scraper_id=scraper_id, owner=owner, status=RunStatus.COMPLETED)
        session.add(run)
        await session.flush()
        for data in items:
            session.add(Item(run_id=run.id, scraper_id=scraper_id, url="http://s/p", data=data))
            await session.flush()  # one by one: ids are crawl order
        return run.id


async def test_duplicate_keys_last_wins_and_items_without_a_key_are_counted_apart(
    db_engine: AsyncEngine,
) -> None:
    who = await make_client(db_engine, "write")
    scraper = await make_scraper(db_engine, who.owner, item_key="sku")
    await stored_run(db_engine, scraper.id, who.owner, [{"sku": "A", "price": "1"}])
    run_id = await stored_run(
        db_engine,
        scraper.id,
        who.owner,
        [{"sku": "A", "price": "1"}, {"sku": "A", "price": "2"}, {"sku": None}, {"price": "3"}],
    )
    async with db_engine.begin() as connection:
        counts = await detect_changes(
            connection, scraper_id=scraper.id, run_id=run_id, item_key="sku"
        )
        [change] = (
            await connection.execute(
                text("SELECT kind, key, fields FROM run_changes WHERE run_id = :r"), {"r": run_id}
            )
        ).all()
    assert counts["duplicates"] == 1
    assert counts["unkeyed"] == 2
    assert (counts["added"], counts["removed"], counts["changed"]) == (0, 0, 1)
    assert change == ("changed", "A", {"price": {"old": "1", "new": "2"}})


async def test_a_field_that_appears_or_disappears_is_a_change_and_numbers_match_text_keys(
    db_engine: AsyncEngine,
) -> None:
    who = await make_client(db_engine, "write")
    scraper = await make_scraper(db_engine, who.owner, item_key="id")
    await stored_run(db_engine, scraper.id, who.owner, [{"id": 7, "a": 1, "tags": ["x"]}])
    run_id = await stored_run(db_engine, scraper.id, who.owner, [{"id": 7, "b": 2, "tags": ["x"]}])
    async with db_engine.begin() as connection:
        await detect_changes(connection, scraper_id=scraper.id, run_id=run_id, item_key="id")
        [(key, fields)] = (
            await connection.execute(
                text("SELECT key, fields FROM run_changes WHERE run_id = :r"), {"r": run_id}
            )
        ).all()
    assert key == "7"
    assert fields == {"a": {"old": 1, "new": None}, "b": {"old": None, "new": 2}}


async def test_failed_runs_are_never_the_baseline(db_engine: AsyncEngine) -> None:
    who = await make_client(db_engine, "write")
    scraper = await make_scraper(db_engine, who.owner, item_key="sku")
    good = await stored_run(db_engine, scraper.id, who.owner, [{"sku": "A"}])
    async with create_session_factory(db_engine)() as session, session.begin():
        session.add(Run(scraper_id=scraper.id, owner=who.owner, status=RunStatus.FAILED))
    run_id = await stored_run(db_engine, scraper.id, who.owner, [{"sku": "A"}, {"sku": "B"}])
    async with db_engine.begin() as connection:
        counts = await detect_changes(
            connection, scraper_id=scraper.id, run_id=run_id, item_key="sku"
        )
    assert counts["compared_run_id"] == good
    assert counts["added"] == 1
