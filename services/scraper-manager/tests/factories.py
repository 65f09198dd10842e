"""Test data for scraper-manager."""

from __future__ import annotations

import uuid
from typing import Any

from scraper_manager.models import Item, Run, RunStatus, Scraper
from servicekit.auth import AccessLevel
from servicekit.auth.repository import ApiKeyRepository
from servicekit.db.engine import create_session_factory
from sqlalchemy.ext.asyncio import AsyncEngine


class Client:
    def __init__(self, owner: str, key: str) -> None:
        self.owner = owner
        self.headers = {"Authorization": f"Bearer {key}"}


async def make_client(
    engine: AsyncEngine, level: str = "admin", owner: str | None = None
) -> Client:
    owner = owner or f"client-{uuid.uuid4().hex[:8]}"
    async with create_session_factory(engine)() as session, session.begin():
        _, key = await ApiKeyRepository(session).create(
            prefix="smk", owner=owner, level=AccessLevel(level)
        )
    return Client(owner, key)


def scraper_body(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"name": "catalog", "url": "http://127.0.0.1:9/start"}
    body.update(overrides)
    return body


async def make_scraper(engine: AsyncEngine, owner: str, **fields: Any) -> Scraper:
    async with create_session_factory(engine)() as session, session.begin():
        scraper = Scraper(owner=owner, **scraper_body(**fields))
        session.add(scraper)
        await session.flush()
    return scraper


async def make_run(
    engine: AsyncEngine,
    scraper: Scraper,
    *,
    status: RunStatus = RunStatus.COMPLETED,
    items: int = 0,
) -> Run:
    """A run of `scraper` with `items` items collected in crawl order (page-0, page-1, ...)."""
    async with create_session_factory(engine)() as session, session.begin():
        run = Run(scraper_id=scraper.id, owner=scraper.owner, status=status, items_collected=items)
        session.add(run)
        await session.flush()
        session.add_all(
            Item(
                run_id=run.id,
                scraper_id=scraper.id,
                url=f"http://127.0.0.1:9/page-{n}",
                data={"n": n},
            )
            for n in range(items)
        )
    return run
