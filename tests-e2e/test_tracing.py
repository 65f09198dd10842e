"""One trace from the business change to the event on NATS, as an operator sees it in a
trace UI: the stack exports to the tests' own OTLP/HTTP receiver (see otlp.py).

Each test names the spans the trace must hold as (service, span name) pairs; webhook-hub's
dispatch and delivery attempt join those lists once its engine makes them.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import nats
from conftest import Stack
from flows import bearer, checkout, pay, stocked_product, subscribe
from nats.aio.msg import Msg
from otlp import OtlpReceiver, ReceivedSpan
from receivers import Receiver, eventually

# The server span is named by the route template, as FastAPI declares it.
NOTIFICATION_SPAN = "POST /api/orders/webhook/{payment_provider}"


def trace_id_of(traceparent: str) -> str:
    return traceparent.split("-")[1]


@asynccontextmanager
async def events_on_nats(stack: Stack, subject: str) -> AsyncIterator[list[Msg]]:
    """Every message published on `subject` while the block runs (a core subscription sees
    what JetStream stores, headers included)."""
    client = await nats.connect(stack.nats_url)
    seen: list[Msg] = []

    async def keep(msg: Msg) -> None:
        seen.append(msg)

    await client.subscribe(subject, cb=keep)
    try:
        yield seen
    finally:
        await client.close()


async def message_about(seen: list[Msg], matches: Callable[[dict[str, Any]], bool]) -> Msg:
    def found() -> list[Msg]:
        return [m for m in seen if matches(json.loads(m.data))]

    messages: list[Msg] = await eventually(found, 30, what="the event on NATS")
    return messages[0]


async def trace_holding(
    otlp: OtlpReceiver, trace_id: str, expected: list[tuple[str, str]]
) -> list[ReceivedSpan]:
    """The trace's spans once all of `expected` have arrived (exporters batch every 200 ms)."""

    def complete() -> list[ReceivedSpan]:
        spans = otlp.trace(trace_id)
        have = {(span.service, span.name) for span in spans}
        return spans if set(expected) <= have else []

    try:
        spans: list[ReceivedSpan] = await eventually(
            complete, 30, what=f"the spans of trace {trace_id}"
        )
    except AssertionError:
        have = sorted({(s.service, s.name) for s in otlp.trace(trace_id)})
        raise AssertionError(f"trace {trace_id} holds {have}; expected {expected}") from None
    return spans


def one(spans: list[ReceivedSpan], service: str, name: str) -> ReceivedSpan:
    found = [span for span in spans if (span.service, span.name) == (service, name)]
    assert len(found) == 1, found
    return found[0]


async def test_one_trace_covers_the_payment_notification_the_outbox_and_the_relay(
    stack: Stack, http: httpx.AsyncClient, receiver: Receiver, otlp: OtlpReceiver
) -> None:
    await subscribe(http, stack.hub, receiver.url, ["order.paid"])
    product = await stocked_product(http, stack.shop, stock=1)
    order = await checkout(http, stack.shop, product["id"], "trace@example.com")

    async with events_on_nats(stack, "events.order.paid") as seen:
        # The sandbox sends the shop's notification endpoint a Stripe-signed notification.
        await pay(http, order["paymentUrl"])
        message = await message_about(seen, lambda e: e["data"]["id"] == order["orderId"])

    envelope = json.loads(message.data)
    trace_id = trace_id_of(envelope["traceparent"])
    assert message.headers is not None
    assert trace_id_of(message.headers["traceparent"]) == trace_id

    spans = await trace_holding(
        otlp,
        trace_id,
        [
            ("commerce-content", NOTIFICATION_SPAN),
            ("commerce-content", "outbox record order.paid"),
            ("commerce-content", "publish events.order.paid"),
        ],
    )
    notification = one(spans, "commerce-content", NOTIFICATION_SPAN)
    record = one(spans, "commerce-content", "outbox record order.paid")
    publish = one(spans, "commerce-content", "publish events.order.paid")
    assert notification.kind == "server"
    # The envelope names the outbox record span; the relay's publish is its child.
    assert envelope["traceparent"].split("-")[2] == record.span_id
    assert publish.parent_span_id == record.span_id
    assert message.headers["traceparent"].split("-")[2] == publish.span_id
    # The SQL of the payment's transaction is in the same trace.
    assert any(
        "db.system" in span.attributes or "db.system.name" in span.attributes
        for span in spans
        if span.service == "commerce-content"
    )


async def test_a_scraper_run_is_one_trace_from_its_span_to_run_completed_on_nats(
    stack: Stack, http: httpx.AsyncClient, shop_website: str, otlp: OtlpReceiver
) -> None:
    owner = f"trace-{uuid.uuid4().hex[:6]}"
    key = stack.scrapers.cli("api-keys", "create", "--owner", owner, "--level", "write")
    api = f"{stack.scrapers.url}/api/v1"
    scraper = await http.post(
        f"{api}/scrapers",
        json={
            "name": "traced shop",
            "url": shop_website,
            "item_selector": "body",
            "selectors": {"name": "h1.name::text"},
            "rate_limit": 50,
        },
        headers=bearer(key),
    )
    assert scraper.status_code == 201, scraper.text
    scraper_id = scraper.json()["id"]

    async with events_on_nats(stack, "events.run.completed") as seen:
        started = await http.post(f"{api}/scrapers/{scraper_id}/run", headers=bearer(key))
        assert started.status_code == 202, started.text
        message = await message_about(seen, lambda e: e["data"]["scraper_id"] == scraper_id)

    envelope = json.loads(message.data)
    trace_id = trace_id_of(envelope["traceparent"])
    spans = await trace_holding(
        otlp,
        trace_id,
        [
            ("scraper-manager", "crawl run"),
            ("scraper-manager", "crawl fetch"),
            ("scraper-manager", "outbox record run.completed"),
            ("scraper-manager", "publish events.run.completed"),
        ],
    )
    run = one(spans, "scraper-manager", "crawl run")
    assert run.parent_span_id == ""
    assert run.attributes["crawler.run.status"] == "completed"
    assert run.attributes["crawler.pages_fetched"] == envelope["data"]["pages_fetched"]
    assert one(spans, "scraper-manager", "outbox record run.completed").parent_span_id == (
        run.span_id
    )
    # One sampled fetch span for a 13-page crawl, not a client span per page.
    clients = [
        s.name
        for s in spans
        if s.service == "scraper-manager"
        and s.kind == "client"
        and not any(key.startswith("db.") for key in s.attributes)  # SQL is a client too
    ]
    assert clients == ["crawl fetch"]
