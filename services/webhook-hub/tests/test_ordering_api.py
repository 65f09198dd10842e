"""The `ordering` field of subscriptions over the API: created, read, changed and removed;
refused at save (422 naming `ordering.key` and the expression's line and column)."""

from __future__ import annotations

import httpx
from servicekit.testing import HttpReceiver
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.factories import consumer_subscribed, create_subscription, make_consumer, subscribe


async def test_ordering_is_created_read_changed_and_removed(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer, plain = await consumer_subscribed(client, db_engine, http_receiver.url)
    assert plain["ordering"] is None
    created = await subscribe(client, consumer.headers, http_receiver.url, ordering={})
    assert created["ordering"] == {"key": None}
    url = f"/webhooks/subscriptions/{created['id']}"

    changed = await client.patch(
        url, json={"ordering": {"key": "event.data.order_id"}}, headers=consumer.headers
    )
    assert changed.status_code == 200, changed.text
    read = await client.get(url, headers=consumer.headers)
    assert read.json()["ordering"] == {"key": "event.data.order_id"}

    untouched = await client.patch(url, json={"timeout_seconds": 5}, headers=consumer.headers)
    assert untouched.json()["ordering"] == {"key": "event.data.order_id"}
    removed = await client.patch(url, json={"ordering": None}, headers=consumer.headers)
    assert removed.json()["ordering"] is None


async def test_an_ordering_key_expression_that_does_not_compile_is_422_naming_it_and_where(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer = await make_consumer(db_engine, "write")
    response = await create_subscription(
        client, consumer.headers, http_receiver.url, ordering={"key": "event.data.order_id +"}
    )
    assert response.status_code == 422
    body = response.json()
    assert body["code"] == "invalid_expression"
    assert (body["field"], body["line"], body["column"]) == ("ordering.key", 1, 22)
    listed = await client.get("/webhooks/subscriptions", headers=consumer.headers)
    assert listed.json()["data"] == []

    created = await subscribe(client, consumer.headers, http_receiver.url)
    refused = await client.patch(
        f"/webhooks/subscriptions/{created['id']}",
        json={"ordering": {"key": "event.data.(order_id"}},
        headers=consumer.headers,
    )
    assert refused.status_code == 422
    assert refused.json()["field"] == "ordering.key"
    kept = await client.get(f"/webhooks/subscriptions/{created['id']}", headers=consumer.headers)
    assert kept.json()["ordering"] is None


async def test_an_ordering_of_the_wrong_shape_is_422(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer = await make_consumer(db_engine, "write")
    for bad in ({"key": 5}, {"key": ""}, {"keys": "event.type"}, "event.type"):
        response = await create_subscription(
            client, consumer.headers, http_receiver.url, ordering=bad
        )
        assert response.status_code == 422, bad


async def test_ordering_with_a_rate_limit_is_refused_at_creation_and_by_patch(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer = await make_consumer(db_engine, "write")
    both = await create_subscription(
        client,
        consumer.headers,
        http_receiver.url,
        ordering={"key": "event.data.order_id"},
        rate_limit_per_second=20,
    )
    assert both.status_code == 422, both.text
    assert both.json()["details"][0]["loc"] == ["body", "ordering"]
    listed = await client.get("/webhooks/subscriptions", headers=consumer.headers)
    assert listed.json()["data"] == []

    ordered = await subscribe(client, consumer.headers, http_receiver.url, ordering={})
    url = f"/webhooks/subscriptions/{ordered['id']}"
    limited = await client.patch(url, json={"rate_limit_per_second": 5}, headers=consumer.headers)
    assert limited.status_code == 422, limited.text
    read = await client.get(url, headers=consumer.headers)
    assert (read.json()["ordering"], read.json()["rate_limit_per_second"]) == ({"key": None}, None)
