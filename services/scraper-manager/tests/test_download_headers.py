"""Every download (results in each format, a run's log), from the API and the dashboard, is
never sniffed as another type nor kept by a cache: it holds the owner's data."""

from __future__ import annotations

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.dashboard import DASH, sign_in
from tests.factories import make_client
from tests.test_export import XLSX_ITEMS, _run_with

FORMATS = ["json", "jsonl", "csv", "xlsx"]


def assert_download_headers(response: httpx.Response) -> None:
    assert response.status_code == 200, response.text
    assert "content-disposition" in response.headers
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["cache-control"] == "no-store"


# The API's `json` is a page of results, not a download.
@pytest.mark.parametrize("fmt", ["jsonl", "csv", "xlsx"])
async def test_an_api_results_export_is_never_sniffed_nor_stored(
    client: httpx.AsyncClient, db_engine: AsyncEngine, fmt: str
) -> None:
    who = await make_client(db_engine, "read")
    scraper_id, run_id = await _run_with(db_engine, who.owner, XLSX_ITEMS)
    assert_download_headers(
        await client.get(
            f"/api/v1/scrapers/{scraper_id}/results?format={fmt}&run_id={run_id}",
            headers=who.headers,
        )
    )


async def test_the_api_run_log_is_never_sniffed_nor_stored(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "read")
    scraper_id, run_id = await _run_with(db_engine, who.owner, [])
    assert_download_headers(
        await client.get(
            f"/api/v1/scrapers/{scraper_id}/runs/{run_id}/log.txt", headers=who.headers
        )
    )


async def test_the_dashboards_downloads_are_never_sniffed_nor_stored(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "read")
    scraper_id, run_id = await _run_with(db_engine, who.owner, XLSX_ITEMS)
    await sign_in(client, who)
    base = f"{DASH}/scrapers/{scraper_id}/runs/{run_id}"
    for path in [*(f"{base}/results.{fmt}" for fmt in FORMATS), f"{base}/log.txt"]:
        assert_download_headers(await client.get(path))
