"""One trace from the business change to the event on NATS, as an operator sees it in a
trace UI: the stack exports to the tests' own OTLP/HTTP receiver (see otlp.py).

Each test names the spans the trace must hold as (service, span name) pairs, through
webhook-hub's dispatch and delivery attempt to the receiver, which gets the trace id in
`traceparent`. A retry is a trace of its own, linked to the delivery's.
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
from receivers import Received, Receiver, eventually

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
    otlp: OtlpReceiver,
    trace_id: str,
    expected: list[tuple[str, str]],
    webhook: Received | None = None,
) -> list[ReceivedSpan]:
    """The trace's spans once all of `expected` have arrived (exporters batch every 200 ms),
    and with `webhook`, its own attempt's span: other tests' subscriptions to the same type
    have attempts in the same trace, which may arrive first."""

    def complete() -> list[ReceivedSpan]:
        spans = otlp.trace(trace_id)
        have = {(span.service, span.name) for span in spans}
        if webhook is not None and not any(
            span.attributes.get("webhook.id") == webhook.id for span in spans
        ):
            return []
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
    assert len(found) == 1, [(s.span_id, s.parent_span_id, s.attributes) for s in found]
    return found[0]


async def delivered(receiver: Receiver, matches: Callable[[dict[str, Any]], bool]) -> Received:
    """The first webhook the receiver got whose payload matches."""

    def found() -> list[Received]:
        return [r for r in receiver.received if matches(r.json())]

    received: list[Received] = await eventually(found, 60, what="the webhook")
    return received[0]


def attempt_of(spans: list[ReceivedSpan], name: str, webhook: Received) -> ReceivedSpan:
    """The attempt span of `webhook`'s delivery (other subscriptions to the event type, from
    other tests, have theirs in the same trace)."""
    return one(
        [s for s in spans if s.attributes.get("webhook.id") == webhook.id], "webhook-hub", name
    )


def assert_hub_spans(spans: list[ReceivedSpan], event_type: str, webhook: Received) -> None:
    """The hub's dispatch continues the trace, the attempt is its child, and the receiver's
    `traceparent` names the attempt."""
    dispatch = one(spans, "webhook-hub", f"dispatch {event_type}")
    attempt = attempt_of(spans, f"deliver {event_type}", webhook)
    assert attempt.parent_span_id == dispatch.span_id
    assert attempt.kind == "client"
    assert attempt.attributes["webhook.id"] == webhook.id
    assert attempt.attributes["webhook.attempt"] == 1
    assert attempt.attributes["cloudevents.event_type"] == event_type
    assert attempt.attributes["http.response.status_code"] == 204
    assert attempt.attributes["webhook.outcome"] == "succeeded"
    assert webhook.headers["traceparent"].split("-")[2] == attempt.span_id


async def test_one_trace_covers_the_payment_notification_the_relay_the_hub_and_the_receiver(
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

    webhook = await delivered(receiver, lambda p: p["data"].get("id") == order["orderId"])
    assert trace_id_of(webhook.headers["traceparent"]) == trace_id
    spans = await trace_holding(
        otlp,
        trace_id,
        [
            ("commerce-content", NOTIFICATION_SPAN),
            ("commerce-content", "outbox record order.paid"),
            ("commerce-content", "publish events.order.paid"),
            ("webhook-hub", "dispatch order.paid"),
            ("webhook-hub", "deliver order.paid"),
        ],
        webhook,
    )
    assert_hub_spans(spans, "order.paid", webhook)
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


async def test_a_scraper_run_is_one_trace_from_its_span_to_the_run_completed_webhook(
    stack: Stack,
    http: httpx.AsyncClient,
    shop_website: str,
    otlp: OtlpReceiver,
    receiver: Receiver,
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
    hook = await http.post(
        f"{api}/webhooks",
        json={"url": receiver.url, "events": ["run.completed"]},
        headers=bearer(key),
    )
    assert hook.status_code == 201, hook.text

    async with events_on_nats(stack, "events.run.completed") as seen:
        started = await http.post(f"{api}/scrapers/{scraper_id}/run", headers=bearer(key))
        assert started.status_code == 202, started.text
        message = await message_about(seen, lambda e: e["data"]["scraper_id"] == scraper_id)

    envelope = json.loads(message.data)
    trace_id = trace_id_of(envelope["traceparent"])
    webhook = await delivered(receiver, lambda p: p["data"].get("scraper_id") == scraper_id)
    assert trace_id_of(webhook.headers["traceparent"]) == trace_id
    spans = await trace_holding(
        otlp,
        trace_id,
        [
            ("scraper-manager", "crawl run"),
            ("scraper-manager", "crawl fetch"),
            ("scraper-manager", "outbox record run.completed"),
            ("scraper-manager", "publish events.run.completed"),
            ("webhook-hub", "dispatch run.completed"),
            ("webhook-hub", "deliver run.completed"),
        ],
        webhook,
    )
    assert_hub_spans(spans, "run.completed", webhook)
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


async def test_a_retried_delivery_shows_both_attempts_the_retry_linked_to_the_first(
    stack: Stack, http: httpx.AsyncClient, receiver: Receiver, otlp: OtlpReceiver
) -> None:
    await subscribe(http, stack.hub, receiver.url, ["order.paid"])
    product = await stocked_product(http, stack.shop, stock=1)
    order = await checkout(http, stack.shop, product["id"], "retry@example.com")
    receiver.status = 500  # the first attempt fails; the retry comes a second later

    def of_order(payload: dict[str, Any]) -> bool:
        return bool(payload["data"].get("id") == order["orderId"])

    await pay(http, order["paymentUrl"])
    first = await delivered(receiver, of_order)
    receiver.status = 204
    retried = await eventually(
        lambda: [r for r in receiver.received if of_order(r.json())][1:], 30, what="the retry"
    )
    assert retried[0].id == first.id  # the same webhook-id

    trace_id = trace_id_of(first.headers["traceparent"])
    spans = await trace_holding(
        otlp,
        trace_id,
        [("webhook-hub", "dispatch order.paid"), ("webhook-hub", "deliver order.paid")],
        first,
    )
    dispatch = one(spans, "webhook-hub", "dispatch order.paid")
    attempt = attempt_of(spans, "deliver order.paid", first)
    assert attempt.attributes["http.response.status_code"] == 500
    assert attempt.attributes["webhook.outcome"] == "rejected"
    assert one(spans, "commerce-content", NOTIFICATION_SPAN).trace_id == trace_id

    # The retry runs in a trace of its own (the receiver sees that one), linked to the
    # dispatch's: a trace UI shows it beside the first attempt, not as a late child.
    retry_trace = trace_id_of(retried[0].headers["traceparent"])
    assert retry_trace != trace_id
    retry = attempt_of(
        await trace_holding(
            otlp, retry_trace, [("webhook-hub", "deliver order.paid (retry)")], first
        ),
        "deliver order.paid (retry)",
        first,
    )
    assert retry.parent_span_id == ""
    assert retry.links == [(trace_id, dispatch.span_id)]
    assert retry.attributes["webhook.id"] == first.id
    assert retry.attributes["webhook.attempt"] == 2
    assert retry.attributes["http.response.status_code"] == 204
    assert retry.attributes["webhook.outcome"] == "succeeded"
