"""The dashboard's pages about one scraper load and authorise it once, in a dependency
(`dashboard/routes/common.py`): a page that changes it finds the owner's scraper before it
checks the level, the dashboard's order, so another owner's id is a 404 to every session."""

from __future__ import annotations

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.dashboard import DASH, sign_in
from tests.factories import make_client, make_scraper

EDITORS = ("edit", "selectors", "selectors/preview")


async def test_a_read_session_gets_404_for_another_owners_scraper_editor(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    owner = await make_client(db_engine, "admin")
    scraper = await make_scraper(db_engine, owner.owner)
    await sign_in(client, await make_client(db_engine, "read"))
    for page in EDITORS:
        answer = await client.get(f"{DASH}/scrapers/{scraper.id}/{page}")
        assert answer.status_code == 404, page


async def test_a_read_session_gets_403_for_its_own_scraper_editor(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    reader = await make_client(db_engine, "read")
    scraper = await make_scraper(db_engine, reader.owner)
    token = await sign_in(client, reader)
    for page in EDITORS:
        answer = await client.get(f"{DASH}/scrapers/{scraper.id}/{page}")
        assert answer.status_code == 403, page
    for action in ("edit", "selectors"):
        answer = await client.post(
            f"{DASH}/scrapers/{scraper.id}/{action}", data={"csrf_token": token}
        )
        assert answer.status_code == 403, action
