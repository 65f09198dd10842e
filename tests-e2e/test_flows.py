"""The services working together, driven like clients: HTTP, GraphQL and NATS only."""

from __future__ import annotations

import asyncio
import base64
import uuid

import httpx
from conftest import CONTENT_API_KEY, CONTENT_WEBHOOK_SECRET, Stack
from flows import bearer, catalogue, checkout, pay, stocked_product, subscribe
from gql import Client, GraphQLRequest
from gql.transport.httpx import HTTPXAsyncTransport
from receivers import Receiver, eventually


def order_global_id(order_id: str) -> str:
    return base64.urlsafe_b64encode(f"Order:{order_id}".encode()).decode().rstrip("=")


async def test_a_paid_order_reaches_the_subscriber_once_signed(
    stack: Stack, http: httpx.AsyncClient, receiver: Receiver
) -> None:
    subscription = await subscribe(http, stack.hub, receiver.url, ["order.paid"])
    product = await stocked_product(http, stack.shop, stock=1)
    order = await checkout(http, stack.shop, product["id"], "ada@example.com")
    await pay(http, order["paymentUrl"])

    paid = await eventually(
        lambda: receiver.of_type(subscription["secret"], "order.paid"), 20, what="order.paid"
    )
    await asyncio.sleep(2)  # anything more would be a duplicate
    paid = receiver.of_type(subscription["secret"], "order.paid")
    assert [p["data"]["id"] for p in paid] == [order["orderId"]]
    assert paid[0]["data"]["status"] == "paid"

    admin = stack.shop.cli("tokens", "create", "--sub", "1", "--role", "admin")
    transport = HTTPXAsyncTransport(url=f"{stack.shop.url}/graphql", headers=bearer(admin))
    async with Client(transport=transport) as session:
        result = await session.execute(
            GraphQLRequest(
                "query($id: ID!) { node(id: $id) { ... on Order { status total } } }",
                variable_values={"id": order_global_id(order["orderId"])},
            )
        )
    assert result["node"]["status"] == "PAID"


async def test_run_webhooks_go_to_the_client_that_owns_the_scraper_only(
    stack: Stack, http: httpx.AsyncClient, shop_website: str
) -> None:
    a_receiver, b_receiver = Receiver(), Receiver()
    await a_receiver.start()
    await b_receiver.start()
    try:
        clients = {}
        for name, receiver in (("a", a_receiver), ("b", b_receiver)):
            owner = f"client-{name}-{uuid.uuid4().hex[:6]}"
            key = stack.scrapers.cli("api-keys", "create", "--owner", owner, "--level", "write")
            api = f"{stack.scrapers.url}/api/v1"
            scraper = await http.post(
                f"{api}/scrapers",
                json={
                    "name": f"shop of {name}",
                    "url": shop_website,
                    "selectors": {"name": "h1.name::text", "price": "span.price::text"},
                    "item_selector": "body",
                    "rate_limit": 50,
                },
                headers=bearer(key),
            )
            assert scraper.status_code == 201, scraper.text
            hook = await http.post(
                f"{api}/webhooks",
                json={"url": receiver.url, "events": ["run.started", "run.completed"]},
                headers=bearer(key),
            )
            assert hook.status_code == 201, hook.text
            clients[name] = (key, scraper.json()["id"], hook.json()["secret"])

        key, scraper_id, secret = clients["a"]
        started = await http.post(
            f"{stack.scrapers.url}/api/v1/scrapers/{scraper_id}/run", headers=bearer(key)
        )
        assert started.status_code == 202, started.text
        completed = await eventually(
            lambda: a_receiver.of_type(secret, "run.completed"), 60, what="run.completed"
        )
        assert [p["data"]["scraper_id"] for p in a_receiver.of_type(secret, "run.started")] == [
            scraper_id
        ]
        assert completed[0]["data"]["pages_fetched"] == 13  # the index and 12 items
        assert completed[0]["data"]["items_collected"] == 13
        await asyncio.sleep(3)
        b_secret = clients["b"][2]
        assert b_receiver.of_type(b_secret, "run.started") == []
        assert b_receiver.of_type(b_secret, "run.completed") == []
    finally:
        await a_receiver.stop()
        await b_receiver.stop()


async def test_a_content_update_notifies_the_cms_within_3_s_and_reaches_subscribers(
    stack: Stack, http: httpx.AsyncClient, receiver: Receiver, content_receiver: Receiver
) -> None:
    subscription = await subscribe(http, stack.hub, receiver.url, ["content.updated"])
    product = (await catalogue(http, stack.shop, CONTENT_API_KEY))[0]
    manager = stack.shop.cli("tokens", "create", "--sub", "2", "--role", "manager")
    before = len(content_receiver.received)
    name = f"Renamed {uuid.uuid4().hex[:6]}"
    updated = await http.patch(
        f"{stack.shop.url}/api/content/products/{product['id']}",
        json={"name": name},
        headers=bearer(manager),
    )
    assert updated.status_code == 200, updated.text
    sent_at = asyncio.get_running_loop().time()
    notified = await eventually(
        lambda: content_receiver.received[before:], 3, interval=0.05, what="content webhook"
    )
    assert asyncio.get_running_loop().time() - sent_at <= 3
    payload = notified[0]
    assert payload.json() == {
        "event": "updated",
        "id": product["id"],
        "alias": product["slug"],
        "published": True,
    }
    content_receiver.verified(CONTENT_WEBHOOK_SECRET)  # signed

    delivered = await eventually(
        lambda: receiver.of_type(subscription["secret"], "content.updated"),
        20,
        what="content.updated delivery",
    )
    assert delivered[0]["data"]["id"] == product["id"]


async def test_event_types_of_all_three_services_are_listed_with_examples(
    stack: Stack, http: httpx.AsyncClient
) -> None:
    response = await http.get(
        f"{stack.hub.url}/webhooks/event-types", headers=bearer(stack.hub.admin_key)
    )
    assert response.status_code == 200
    types = {t["name"]: t for t in response.json()["data"]}
    expected = {
        "order.created",
        "order.paid",
        "inquiry.created",
        "content.created",
        "content.updated",
        "article.created",
        "run.started",
        "run.completed",
        "run.failed",
        "items.collected",
        "subscription.disabled",
    }
    assert expected <= set(types)
    assert {types[name]["source"] for name in expected} == {
        "webhook-hub",
        "scraper-manager",
        "commerce-content",
    }
    assert all(types[name]["example_payload"] for name in expected)
