"""CEL filters and transforms on subscriptions (issue 32), end to end: saved through the API
and NATS (refused with their position), applied by a real worker, received by real HTTP
receivers that verify the signatures of what was sent."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
from nats.aio.client import Client as NatsClient
from nats.js import JetStreamContext
from servicekit.testing import HttpReceiver
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine
from standardwebhooks import Webhook
from webhook_hub.expressions import ACCUMULATING_LIST_MAX
from webhook_hub.settings import Settings

from tests.factories import (
    Delivering,
    create_subscription,
    make_consumer,
    nats_create_request,
    non_test,
    publish_event,
    signed_in,
    subscribe,
    wait_for_posts,
)
from tests.test_portal_as_sent import posts_of, requests_on, settled


async def tally_of(engine: AsyncEngine, subscription_id: str, column: str, at_least: int) -> Any:
    """The subscription's stored tally, once `column` reaches `at_least` (flushed by the
    worker every `expression_tally_seconds`)."""
    deadline = asyncio.get_running_loop().time() + 15
    while True:
        async with engine.connect() as conn:
            row = (
                await conn.execute(
                    text(
                        "SELECT * FROM subscription_expression_tallies WHERE subscription_id = :id"
                    ),
                    {"id": subscription_id},
                )
            ).first()
        if row is not None and getattr(row, column) >= at_least:
            return row
        assert asyncio.get_running_loop().time() < deadline, f"{column} never reached {at_least}"
        await asyncio.sleep(0.2)


async def test_a_filter_delivers_only_the_events_it_is_true_of_and_counts_the_others(
    worker: Settings,
    delivering: Delivering,
) -> None:
    consumer, created = await delivering.subscribed(
        ["order.paid"],
        filter='event.type == "order.paid" && event.data.total > 100',
    )
    assert created["filter"] == 'event.type == "order.paid" && event.data.total > 100'
    posts = await delivering.published_and_posted(
        "order.paid", [{"total": t} for t in (50, 150, 99, 101)], 2
    )
    await tally_of(delivering.engine, created["id"], "filtered", 2)
    assert sorted(
        Webhook(created["secret"]).verify(p.body, p.headers)["data"]["total"] for p in posts
    ) == [101, 150]
    assert len(non_test(delivering.receiver.requests)) == 2
    # The portal's endpoint page shows the count.
    await signed_in(delivering.client, consumer)
    page = (await delivering.client.get(f"/portal/endpoints/{created['id']}")).text
    assert '<dd id="expression-filtered">2</dd>' in page


async def test_a_transform_sends_its_result_as_data_signed_as_sent_and_stored_as_sent(
    worker: Settings,
    delivering: Delivering,
) -> None:
    consumer, created = await delivering.subscribed(
        ["order.paid"],
        transform='{"order": event.data.order_id, "skus": event.data.items.map(i, i.sku), '
        '"event": event.id}',
    )
    event = await delivering.publish(
        "order.paid",
        {"order_id": "o-7", "items": [{"sku": "a"}, {"sku": "b"}], "pii": "x"},
    )
    [post] = await delivering.posts(1)
    body = Webhook(created["secret"]).verify(post.body, post.headers)
    assert body["type"] == "order.paid"
    assert body["data"] == {"order": "o-7", "skus": ["a", "b"], "event": str(event.id)}
    # The delivery log (and the portal's "request as sent") holds what was sent.
    [delivery] = await delivering.recorded(consumer, created["id"], "event_type=order.paid", 1)
    detail = await delivering.detail(consumer, delivery["id"])
    assert detail["payload"] == body["data"]


async def test_expressions_that_do_not_compile_are_refused_at_save_with_field_and_position(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer = await make_consumer(db_engine, "write")
    refused = await create_subscription(
        client, consumer.headers, http_receiver.url, filter='event.type ==\n  "a" &&'
    )
    assert refused.status_code == 422
    assert refused.json()["code"] == "invalid_expression"
    assert (refused.json()["field"], refused.json()["line"], refused.json()["column"]) == (
        "filter",
        2,
        9,
    )
    created = await subscribe(client, consumer.headers, http_receiver.url)
    patched = await client.patch(
        f"/webhooks/subscriptions/{created['id']}",
        json={"transform": '{"a": evnt.data}'},
        headers=consumer.headers,
    )
    assert patched.status_code == 422
    assert (patched.json()["field"], patched.json()["line"], patched.json()["column"]) == (
        "transform",
        1,
        11,  # the binding points at the `.` of the unknown `evnt.data`
    )
    not_boolean = await client.patch(
        f"/webhooks/subscriptions/{created['id']}",
        json={"filter": "event.data"},
        headers=consumer.headers,
    )
    assert not_boolean.status_code == 200
    assert not_boolean.json()["filter"] == "event.data"
    removed = await client.patch(
        f"/webhooks/subscriptions/{created['id']}", json={"filter": None}, headers=consumer.headers
    )
    assert removed.json()["filter"] is None


async def test_a_costly_expression_is_refused_at_save(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer = await make_consumer(db_engine, "write")
    refused = await create_subscription(
        client,
        consumer.headers,
        http_receiver.url,
        transform="event.data.a.map(x, event.data.a.map(y, x + y))",
    )
    assert refused.status_code == 422
    assert (refused.json()["field"], refused.json()["column"]) == ("transform", 34)


async def test_a_costly_expression_is_cut_off_per_event_and_other_deliveries_go_on(
    worker: Settings,
    client: httpx.AsyncClient,
    db_engine: AsyncEngine,
    js: JetStreamContext,
) -> None:
    costly_receiver, plain_receiver = HttpReceiver(), HttpReceiver()
    await costly_receiver.start()
    await plain_receiver.start()
    try:
        consumer = await make_consumer(db_engine, "write")
        # Both saved; per event, the nested loops are refused as past their cost bound
        # (2,000 x 2,000 iterations over the event), and the map events holding lists past
        # ACCUMULATING_LIST_MAX.
        looping = await subscribe(
            client,
            consumer.headers,
            costly_receiver.url,
            ["order.paid"],
            filter="event.data.a.exists(x, event.data.a.exists(y, x + y < 0))",
        )
        mapping = await subscribe(
            client,
            consumer.headers,
            costly_receiver.url,
            ["order.paid"],
            transform="event.data.a.map(x, x * 2)",
        )
        await subscribe(client, consumer.headers, plain_receiver.url, ["order.paid"])
        await costly_receiver.wait_for(4)
        await plain_receiver.wait_for(2)
        big = list(range(max(2_000, ACCUMULATING_LIST_MAX + 1)))
        for n in range(10):
            await publish_event(js, "order.paid", {"n": n, "a": big})
        posts = await wait_for_posts(plain_receiver, 10)
        assert sorted(json.loads(p.body)["data"]["n"] for p in posts) == list(range(10))
        looped = await tally_of(db_engine, looping["id"], "filter_errors", 10)
        mapped = await tally_of(db_engine, mapping["id"], "transform_errors", 10)
        assert "cost bound" in looped.last_error
        assert "longer than" in mapped.last_error
        assert non_test(costly_receiver.requests) == []
    finally:
        await costly_receiver.stop()
        await plain_receiver.stop()


async def test_the_nats_contract_takes_a_filter_and_refuses_one_with_its_position(
    worker: Settings, nats_client: NatsClient, http_receiver: HttpReceiver
) -> None:
    request = nats_create_request(http_receiver.url)
    bad = await nats_client.request(
        "hub.subscriptions.create",
        json.dumps({**request, "filter": "event.data.status = 'failed'"}).encode(),
        timeout=5,
    )
    refused = json.loads(bad.data)
    assert refused["ok"] is False
    assert (refused["status"], refused["code"], refused["field"]) == (
        422,
        "invalid_expression",
        "filter",
    )
    assert refused["column"] >= 1
    good = await nats_client.request(
        "hub.subscriptions.create",
        json.dumps({**request, "filter": "event.data.status == 'failed'"}).encode(),
        timeout=5,
    )
    assert json.loads(good.data)["subscription"]["filter"] == "event.data.status == 'failed'"


async def test_a_transformed_delivery_is_retried_and_shown_as_sent_with_its_signature(
    worker: Settings,
    delivering: Delivering,
) -> None:
    consumer, created = await delivering.subscribed(
        ["order.paid"], transform='{"order": event.data.order_id}'
    )
    delivering.receiver.respond_with(500)  # so a retry is sent too, from the stored delivery
    await delivering.publish("order.paid", {"order_id": "o-9", "card": "4242"})
    delivery = await settled(
        delivering.client, consumer.headers, created["id"], "event_type=order.paid"
    )
    received = posts_of(delivering.receiver, "order.paid")
    assert len(received) == 2
    for post in received:
        sent = Webhook(created["secret"]).verify(post.body, post.headers)
        assert sent["data"] == {"order": "o-9"}
    await signed_in(delivering.client, consumer)
    page = (await delivering.client.get(f"/portal/deliveries/{delivery['id']}")).text
    shown, body = requests_on(page)
    assert body == received[0].body == received[1].body
    assert [headers["webhook-signature"] for _, headers in shown] == [
        post.headers["webhook-signature"] for post in received
    ]
    assert 'id="transform-note"' in page
