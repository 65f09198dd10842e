"""The API's /metrics labels each request with the route template it matched."""

from __future__ import annotations

import uuid

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.factories import make_consumer


async def test_requests_are_labelled_with_the_full_route_template_under_the_webhooks_prefix(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    consumer = await make_consumer(db_engine)
    listed = await client.get("/webhooks/subscriptions", headers=consumer.headers)
    assert listed.status_code == 200
    missing = await client.get(f"/webhooks/subscriptions/{uuid.uuid4()}", headers=consumer.headers)
    assert missing.status_code == 404
    metrics = (await client.get("/metrics")).text
    assert 'route="/webhooks/subscriptions",status="200"' in metrics
    assert 'route="/webhooks/subscriptions/{subscription_id}",status="404"' in metrics
    assert 'route="/subscriptions' not in metrics
