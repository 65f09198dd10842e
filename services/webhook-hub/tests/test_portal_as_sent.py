"""The delivery page's "requests as sent" against what a real receiver got: the same
`webhook-id`, `webhook-timestamp`, `webhook-signature`, custom headers and body bytes, for a
first attempt and its retry; and said plainly what cannot be shown once the secret rotated or
the endpoint changed."""

from __future__ import annotations

import asyncio
import html
import json
import re
from typing import Any

import httpx
from nats.js import JetStreamContext
from servicekit.signing import verify_webhook
from servicekit.testing import HttpReceiver
from servicekit.testing.receiver import ReceivedRequest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine
from webhook_hub.settings import Settings

from tests.factories import (
    deliveries_of,
    make_consumer,
    publish_event,
    signed_in,
    subscribe,
    subscription_body,
)

# Added by the HTTP client itself; the page says so and lists the rest.
CLIENT_HEADERS = {"host", "content-length"}
# Sent per attempt and not kept (the page says so): present when the worker traces, or when
# the event carried a trace context, as it does once an earlier test left a provider installed.
NOT_KEPT = {"traceparent", "tracestate"}


def requests_on(page: str) -> tuple[list[tuple[str, dict[str, str]]], bytes]:
    """Each attempt's request line and headers (names lowercased, as the receiver records
    them) on a delivery page, and the body's bytes."""
    shown = []
    for block in re.findall(r'<pre class="body" id="request-\d+"[^>]*>(.*?)</pre>', page, re.S):
        line, *headers = html.unescape(block).strip().split("\n")
        named = (h.split(": ", 1) for h in headers)
        shown.append((line, {name.lower(): value for name, value in named}))
    body = re.search(r'<pre class="body" id="request-body"[^>]*>(.*?)</pre>', page, re.S)
    assert body
    return shown, html.unescape(body.group(1)).encode()


async def settled(
    client: httpx.AsyncClient, consumer_headers: dict[str, str], subscription_id: str, query: str
) -> dict[str, Any]:
    """The one delivery `query` finds, once it succeeded (its attempts are all written)."""
    for _ in range(100):
        found = await deliveries_of(client, consumer_headers, subscription_id, query)
        if found and found[0]["status"] == "succeeded":
            return found[0]
        await asyncio.sleep(0.1)
    raise AssertionError("the delivery did not succeed")


def posts_of(receiver: HttpReceiver, event_type: str) -> list[ReceivedRequest]:
    return [
        r
        for r in receiver.requests
        if r.method == "POST" and json.loads(r.body).get("type") == event_type
    ]


async def test_each_attempts_request_is_shown_as_the_receiver_got_it(
    worker: Settings,
    client: httpx.AsyncClient,
    db_engine: AsyncEngine,
    http_receiver: HttpReceiver,
    js: JetStreamContext,
) -> None:
    consumer = await make_consumer(db_engine, "write")
    response = await client.post(
        "/webhooks/subscriptions",
        json=subscription_body(http_receiver.url, headers={"X-Team": "warehouse"}),
        headers=consumer.headers,
    )
    created = response.json()
    await http_receiver.wait_for(2)  # the probe, then the creation's test event
    http_receiver.respond_with(500)  # so a retry is sent too
    # Keys out of `jsonb`'s order, nested, non-ASCII: the body is the producer's text.
    await publish_event(js, "order.paid", {"zeta": 1, "alpha": {"b": 2, "a": 1}, "name": "Zoë"})
    delivery = await settled(client, consumer.headers, created["id"], "event_type=order.paid")
    received = posts_of(http_receiver, "order.paid")
    assert len(received) == 2
    await signed_in(client, consumer)
    page = (await client.get(f"/portal/deliveries/{delivery['id']}")).text
    shown, body = requests_on(page)
    assert len(shown) == 2
    for (line, headers), got in zip(shown, received, strict=True):
        assert line == f"POST {http_receiver.url}"
        assert headers == {
            k: v for k, v in got.headers.items() if k not in CLIENT_HEADERS | NOT_KEPT
        }
        assert headers["webhook-signature"] == got.headers["webhook-signature"]
        assert headers["x-team"] == "warehouse"
        assert body == got.body
    assert b'{"zeta":1,"alpha":{"b":2,"a":1},"name":"Zo\xc3\xab"}' in body
    assert "cannot be shown" not in page


async def test_after_a_rotation_the_signature_is_said_not_to_be_shown(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer = await make_consumer(db_engine, "write")
    created = await subscribe(client, consumer.headers, http_receiver.url)
    test_delivery = (await deliveries_of(client, consumer.headers, created["id"]))[0]["id"]
    async with db_engine.begin() as connection:  # an attempt an hour ago
        await connection.execute(
            text(
                "INSERT INTO delivery_attempts (delivery_id, attempted_at, status_code, duration_ms)"
                " VALUES (:id, now() - interval '1 hour', 200, 5)"
            ),
            {"id": test_delivery},
        )
    await signed_in(client, consumer)
    before, body = requests_on((await client.get(f"/portal/deliveries/{test_delivery}")).text)
    headers = before[0][1]
    # Made again with the secret: it verifies (at the attempt's own time).
    verify_webhook(headers, body, [created["secret"]], now=int(headers["webhook-timestamp"]))
    rotated = await client.post(
        f"/webhooks/subscriptions/{created['id']}/rotate-secret", headers=consumer.headers
    )
    assert rotated.status_code == 200
    page = (await client.get(f"/portal/deliveries/{test_delivery}")).text
    [(line, after)], _ = requests_on(page)
    assert after["webhook-timestamp"] == headers["webhook-timestamp"]
    assert "webhook-signature" not in after
    assert "the signing secret has been rotated since this attempt" in page
    # A rotation changes the subscription: its URL and headers then are not claimed either.
    assert line == "POST (the endpoint's URL of that moment)"


async def test_an_attempt_made_37_s_after_a_rotation_shows_both_signatures_and_the_overlap(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer = await make_consumer(db_engine, "write")
    created = await subscribe(client, consumer.headers, http_receiver.url)
    test_delivery = (await deliveries_of(client, consumer.headers, created["id"]))[0]["id"]
    rotated = await client.post(
        f"/webhooks/subscriptions/{created['id']}/rotate-secret", headers=consumer.headers
    )
    assert rotated.status_code == 200
    async with db_engine.begin() as connection:  # the attempt of issue 35: 37 s after it
        await connection.execute(
            text(
                "INSERT INTO delivery_attempts (delivery_id, attempted_at, status_code, duration_ms)"
                " SELECT :id, secret_rotated_at + interval '37 s', 200, 5"
                " FROM subscriptions WHERE id = :sid"
            ),
            {"id": test_delivery, "sid": created["id"]},
        )
    await signed_in(client, consumer)
    page = (await client.get(f"/portal/deliveries/{test_delivery}")).text
    shown, body = requests_on(page)
    line, headers = shown[-1]
    assert "rotated since this attempt" not in page
    assert "Signed during the rotation&#39;s overlap" in page
    when = int(headers["webhook-timestamp"])
    for secret in (rotated.json()["secret"], created["secret"]):  # each verifies alone
        verify_webhook(headers, body, [secret], now=when)
    assert line == f"POST {http_receiver.url}"
