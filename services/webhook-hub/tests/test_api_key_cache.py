"""webhook-hub's API processes remember the keys they found active for
`API_KEY_CACHE_SECONDS` (5 s); revoking a key in a process ends it there at once."""

from __future__ import annotations

import uuid

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.factories import make_consumer


async def test_a_remembered_key_revoked_over_the_api_is_refused_at_once(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    owner = f"consumer-{uuid.uuid4().hex[:8]}"
    admin = await make_consumer(db_engine, "admin", owner=owner)
    writer = await make_consumer(db_engine, "write", owner=owner)
    me = await client.get("/webhooks/api-keys/me", headers=writer.headers)
    assert me.status_code == 200  # the key is remembered from here on
    revoked = await client.delete(
        f"/webhooks/api-keys/{me.json()['key_id']}", headers=admin.headers
    )
    assert revoked.status_code == 204
    assert (await client.get("/webhooks/api-keys/me", headers=writer.headers)).status_code == 401
    refused = await client.post(
        "/webhooks/events", json={"type": "a.b", "data": {}}, headers=writer.headers
    )
    assert refused.status_code == 401
