"""The creation probe is an outbound HTTP call: it runs after the subscription is committed,
so a slow endpoint never holds a database transaction (nor a pooled connection) open."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest
from aiohttp import web
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.factories import make_consumer, subscription_body


class StalledEndpoint:
    """Answers every request only once released; `arrived` is set when one comes in."""

    def __init__(self) -> None:
        self.arrived = asyncio.Event()
        self.release = asyncio.Event()
        self.url = ""

    async def handle(self, request: web.Request) -> web.Response:
        self.arrived.set()
        await self.release.wait()
        return web.Response(status=204)


@pytest.fixture
async def stalled_endpoint() -> AsyncIterator[StalledEndpoint]:
    endpoint = StalledEndpoint()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", endpoint.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    endpoint.url = f"http://127.0.0.1:{port}/hook"
    yield endpoint
    endpoint.release.set()
    await runner.cleanup()


async def open_transactions(engine: AsyncEngine) -> list[str]:
    """States of the other sessions on this database that are inside a transaction."""
    async with engine.connect() as conn:
        rows = await conn.execute(
            text(
                "SELECT state FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid() AND xact_start IS NOT NULL"
            )
        )
        return [str(row.state) for row in rows]


async def test_no_transaction_is_open_while_the_probe_waits_on_a_slow_endpoint(
    client: httpx.AsyncClient, db_engine: AsyncEngine, stalled_endpoint: StalledEndpoint
) -> None:
    consumer = await make_consumer(db_engine, "write")
    creation = asyncio.create_task(
        client.post(
            "/webhooks/subscriptions",
            json=subscription_body(stalled_endpoint.url),
            headers=consumer.headers,
        )
    )
    await asyncio.wait_for(stalled_endpoint.arrived.wait(), 5)
    assert await open_transactions(db_engine) == []
    async with db_engine.connect() as conn:
        committed = await conn.scalar(
            text("SELECT count(*) FROM subscriptions WHERE owner = :o"), {"o": consumer.owner}
        )
    assert committed == 1
    stalled_endpoint.release.set()
    response = await creation
    assert response.status_code == 201
    assert response.json()["probe"] == {"reachable": True, "status_code": 204, "error": None}
