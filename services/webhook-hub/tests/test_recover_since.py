"""`POST /webhooks/subscriptions/{id}/recover` takes `since` as an ISO 8601 date-time with a
UTC offset; anything else is a 422 that names that format."""

from __future__ import annotations

import httpx
import pytest
from servicekit.testing import HttpReceiver
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.factories import make_consumer, subscribe


async def recover(
    client: httpx.AsyncClient, engine: AsyncEngine, receiver: HttpReceiver, since: object
) -> httpx.Response:
    """Recover with `since` on a fresh subscription of a fresh consumer."""
    consumer = await make_consumer(engine, "write")
    created = await subscribe(client, consumer.headers, receiver.url)
    return await client.post(
        f"/webhooks/subscriptions/{created['id']}/recover",
        json={"since": since},
        headers=consumer.headers,
    )


@pytest.mark.parametrize(
    "since",
    ["yesterday", "2026-13-01T00:00:00Z", "22/11/2026 10:00", 1764000000, None],
)
async def test_a_malformed_since_is_422_naming_the_format(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver, since: object
) -> None:
    response = await recover(client, db_engine, http_receiver, since)
    assert response.status_code == 422
    assert "ISO 8601 date-time with a UTC offset" in response.json()["error"]


async def test_a_since_without_an_offset_is_422(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    response = await recover(client, db_engine, http_receiver, "2026-11-22T10:00:00")
    assert response.status_code == 422
    assert "add the offset" in response.json()["error"]


@pytest.mark.parametrize("since", ["2026-11-22T10:00:00Z", "2026-11-22T11:00:00+01:00"])
async def test_a_since_with_an_offset_is_accepted(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver, since: str
) -> None:
    response = await recover(client, db_engine, http_receiver, since)
    assert response.status_code == 202
    assert response.json() == {"recovered": 0}
