"""Tracing of deliveries: the dispatch continues the producer's trace, the first attempt is its
child, a retry starts a trace of its own linked to it, the receiver gets the trace id in
`traceparent` (unless its subscription turns that off), and the delivery row keeps the trace
context for retries hours later."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from nats.js import JetStreamContext
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from servicekit.events import CloudEvent
from servicekit.testing import HttpReceiver
from servicekit.testing.receiver import ReceivedRequest
from servicekit.testing.tracing import RecordedSpans
from servicekit.tracing import TRACEPARENT, current_trace_headers
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine
from webhook_hub.delivery_engine import sender as sender_module
from webhook_hub.delivery_engine.sender import WebhookSender
from webhook_hub.settings import Settings

from tests.factories import make_consumer, subscribe
from tests.job_factories import make_job

PRODUCER = trace.get_tracer("tests.producer")


def trace_id_of(traceparent: str) -> str:
    return traceparent.split("-")[1]


async def publish_traced(js: JetStreamContext, event_type: str, data: dict[str, Any]) -> str:
    """Publish an event recorded inside a producer span, as the relay does; its trace id."""
    with PRODUCER.start_as_current_span("checkout") as span:
        event = CloudEvent(
            source="tests",
            type=event_type,
            data=data,
            traceparent=current_trace_headers()[TRACEPARENT],
        )
        await js.publish(event.subject, event.to_json(), headers={"Nats-Msg-Id": str(event.id)})
        return format(span.get_span_context().trace_id, "032x")


async def wait_for_event_posts(
    receiver: HttpReceiver, event_type: str, count: int, path: str, timeout: float = 15.0
) -> list[ReceivedRequest]:
    """The posts of `event_type` to `path`: earlier tests' subscriptions of the same type, to
    the same receiver, get the same events."""
    needle = f'"type":"{event_type}"'.encode()
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        posts = [
            r
            for r in receiver.requests
            if r.method == "POST" and r.path == path and needle in r.body
        ]
        if len(posts) >= count:
            return posts
        await asyncio.sleep(0.05)
    raise AssertionError(f"expected {count} {event_type} deliveries")


async def wait_for_spans(
    spans: RecordedSpans, prefix: str, count: int, *, of: str, timeout: float = 10.0
) -> list[ReadableSpan]:
    """`count` spans named `prefix`... of one trace or subscription (`of`: its id); earlier
    tests' subscriptions get the same events."""

    def belongs(span: ReadableSpan) -> bool:
        attributes = dict(span.attributes or {})
        return of in (hex_trace(span), attributes.get("webhook.subscription_id"))

    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        found = [s for s in spans.finished if s.name.startswith(prefix) and belongs(s)]
        if len(found) >= count:
            return sorted(found, key=lambda s: s.start_time or 0)
        await asyncio.sleep(0.05)
    raise AssertionError(f"expected {count} spans named {prefix}...")


@dataclass
class TracedHub:
    """The worker running, a subscriber and its receiver, events published in a trace."""

    client: httpx.AsyncClient
    engine: AsyncEngine
    receiver: HttpReceiver
    js: JetStreamContext

    path: str = ""

    async def subscribe(self, event_type: str, **extra: Any) -> dict[str, Any]:
        """A subscription of its own receiving path, so its posts are told from others'."""
        consumer = await make_consumer(self.engine, "write")
        self.path = f"/traced-{uuid.uuid4().hex[:8]}"
        url = self.receiver.url.rstrip("/") + self.path
        return await subscribe(self.client, consumer.headers, url, [event_type], **extra)

    async def deliver(self, event_type: str, posts: int = 1) -> tuple[str, list[ReceivedRequest]]:
        """Publish a traced event; its trace id and the first `posts` of it at the
        subscription's path."""
        trace_id = await publish_traced(self.js, event_type, {"id": 1})
        return trace_id, await wait_for_event_posts(self.receiver, event_type, posts, self.path)


@pytest.fixture
def hub(
    worker: Settings,
    client: httpx.AsyncClient,
    db_engine: AsyncEngine,
    http_receiver: HttpReceiver,
    js: JetStreamContext,
) -> TracedHub:
    return TracedHub(client, db_engine, http_receiver, js)


def hex_trace(span: ReadableSpan) -> str:
    assert span.context is not None
    return format(span.context.trace_id, "032x")


async def test_dispatch_continues_the_producers_trace_and_the_receiver_gets_its_trace_id(
    spans: RecordedSpans, hub: TracedHub
) -> None:
    created = await hub.subscribe("order.paid")
    trace_id, [post] = await hub.deliver("order.paid")
    [dispatch] = await wait_for_spans(spans, "dispatch order.paid", 1, of=trace_id)
    [attempt] = await wait_for_spans(spans, "deliver order.paid", 1, of=created["id"])
    assert hex_trace(dispatch) == trace_id
    assert hex_trace(attempt) == trace_id
    assert attempt.parent is not None
    assert dispatch.context is not None
    assert attempt.parent.span_id == dispatch.context.span_id
    assert trace_id_of(post.headers["traceparent"]) == trace_id
    attributes = dict(attempt.attributes or {})
    assert attributes["webhook.subscription_id"] == created["id"]
    assert attributes["cloudevents.event_type"] == "order.paid"
    assert attributes["webhook.id"] == post.headers["webhook-id"]
    assert attributes["webhook.attempt"] == 1
    assert attributes["http.response.status_code"] == 200
    assert attributes["webhook.outcome"] == "succeeded"


async def test_the_delivery_row_keeps_the_dispatchs_trace_context_for_retries(
    spans: RecordedSpans, hub: TracedHub
) -> None:
    created = await hub.subscribe("run.completed")
    trace_id, _ = await hub.deliver("run.completed")
    [dispatch] = await wait_for_spans(spans, "dispatch run.completed", 1, of=trace_id)
    await asyncio.sleep(0.5)  # recorded in the next flush
    async with hub.engine.connect() as conn:
        traceparent = (
            await conn.execute(
                text(
                    "SELECT traceparent FROM deliveries"
                    " WHERE subscription_id = :id AND event_type = 'run.completed'"
                ),
                {"id": created["id"]},
            )
        ).scalar_one()
    assert dispatch.context is not None
    assert traceparent.startswith(f"00-{trace_id}-{dispatch.context.span_id:016x}-")


async def test_a_retry_is_a_trace_of_its_own_linked_to_the_first_attempts(
    spans: RecordedSpans, hub: TracedHub
) -> None:
    created = await hub.subscribe("order.created")
    await hub.receiver.wait_for(2)  # probe and test event
    hub.receiver.respond_with(500)
    trace_id, (first_post, retry_post) = await hub.deliver("order.created", posts=2)
    first, retry = await wait_for_spans(spans, "deliver order.created", 2, of=created["id"])
    assert hex_trace(first) == trace_id
    assert dict(first.attributes or {})["webhook.outcome"] == "rejected"
    assert dict(first.attributes or {})["http.response.status_code"] == 500
    assert retry.name == "deliver order.created (retry)"
    assert retry.parent is None
    assert hex_trace(retry) != trace_id
    assert [format(link.context.trace_id, "032x") for link in retry.links] == [trace_id]
    assert dict(retry.attributes or {})["webhook.attempt"] == 2
    assert dict(retry.attributes or {})["webhook.outcome"] == "succeeded"
    # The receiver sees the attempt's own trace each time: the retry's is the new one.
    assert trace_id_of(first_post.headers["traceparent"]) == trace_id
    assert trace_id_of(retry_post.headers["traceparent"]) == hex_trace(retry)


async def test_a_subscription_with_trace_context_off_gets_no_traceparent(
    spans: RecordedSpans, hub: TracedHub
) -> None:
    created = await hub.subscribe("run.failed", send_trace_context=False)
    assert created["send_trace_context"] is False
    _, [post] = await hub.deliver("run.failed")
    assert "traceparent" not in post.headers
    assert "tracestate" not in post.headers
    # Still traced on our side.
    await wait_for_spans(spans, "deliver run.failed", 1, of=created["id"])


async def test_trace_context_can_be_turned_off_and_on_again_by_patch(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer = await make_consumer(db_engine, "write")
    created = await subscribe(client, consumer.headers, http_receiver.url, ["order.paid"])
    assert created["send_trace_context"] is True
    url = f"/webhooks/subscriptions/{created['id']}"
    off = await client.patch(url, json={"send_trace_context": False}, headers=consumer.headers)
    assert off.status_code == 200
    assert off.json()["send_trace_context"] is False
    read = await client.get(url, headers=consumer.headers)
    assert read.json()["send_trace_context"] is False
    on = await client.patch(url, json={"send_trace_context": True}, headers=consumer.headers)
    assert on.json()["send_trace_context"] is True


async def test_trace_context_must_be_a_boolean(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer = await make_consumer(db_engine, "write")
    created = await subscribe(client, consumer.headers, http_receiver.url, ["order.paid"])
    response = await client.patch(
        f"/webhooks/subscriptions/{created['id']}",
        json={"send_trace_context": "sometimes"},
        headers=consumer.headers,
    )
    assert response.status_code == 422


SAMPLED_TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
UNSAMPLED_TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"


async def attempt_in_trace(
    receiver: HttpReceiver, traceparent: str, *, attempts: int = 0
) -> tuple[int | None, ReceivedRequest]:
    """One attempt in the trace `traceparent` names, by a sender built once the SDK is
    installed (the test's `spans`), as a traced worker's is; its status and what the
    receiver got."""
    sender = WebhookSender(user_agent="test", response_body_limit=4096, guard=None)
    job = make_job(endpoint_url=receiver.url, attempts=attempts)
    job.traceparent = traceparent
    result = await sender.attempt(job)
    [post] = receiver.requests
    return result.status_code, post


async def test_a_first_attempt_in_an_unsampled_trace_makes_no_span_and_passes_the_context_on(
    spans: RecordedSpans, http_receiver: HttpReceiver
) -> None:
    status, post = await attempt_in_trace(http_receiver, UNSAMPLED_TRACEPARENT)
    assert status == 200
    assert [span.name for span in spans.finished] == []
    assert post.headers["traceparent"] == UNSAMPLED_TRACEPARENT


async def test_a_first_attempt_in_a_sampled_trace_is_a_span_the_receiver_continues(
    spans: RecordedSpans, http_receiver: HttpReceiver
) -> None:
    _, post = await attempt_in_trace(http_receiver, SAMPLED_TRACEPARENT)
    attempt = spans.named("deliver order.paid")
    assert hex_trace(attempt) == SAMPLED_TRACEPARENT.split("-")[1]
    assert attempt.context is not None
    assert post.headers["traceparent"].split("-")[2] == format(attempt.context.span_id, "016x")


async def test_a_retry_in_an_unsampled_trace_still_gets_a_sampling_decision_of_its_own(
    spans: RecordedSpans, http_receiver: HttpReceiver
) -> None:
    await attempt_in_trace(http_receiver, UNSAMPLED_TRACEPARENT, attempts=1)
    # A retry starts a trace of its own (linked), sampled afresh: here always on.
    retry = spans.named("deliver order.paid (retry)")
    assert hex_trace(retry) != UNSAMPLED_TRACEPARENT.split("-")[1]


# --- without an SDK (no OTEL_EXPORTER_OTLP_ENDPOINT) ------------------------------------------
# The SDK is process-global and, once a test here installs it, stays: these senders are built
# answering "no SDK" to their one check, as in a worker started without an endpoint.

PRODUCER_TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


@pytest.fixture
def untraced(monkeypatch: pytest.MonkeyPatch) -> WebhookSender:
    monkeypatch.setattr(sender_module, "_tracing_enabled", lambda: False)
    return WebhookSender(user_agent="test", response_body_limit=4096, guard=None)


async def test_untraced_the_receiver_gets_the_producers_traceparent_and_tracestate(
    untraced: WebhookSender, http_receiver: HttpReceiver
) -> None:
    job = make_job(endpoint_url=http_receiver.url)
    job.traceparent, job.tracestate = PRODUCER_TRACEPARENT, "vendor=x"
    result = await untraced.attempt(job)
    assert result.status_code == 200
    [post] = http_receiver.requests
    assert post.headers["traceparent"] == PRODUCER_TRACEPARENT
    assert post.headers["tracestate"] == "vendor=x"


async def test_untraced_a_subscription_with_trace_context_off_gets_none(
    untraced: WebhookSender, http_receiver: HttpReceiver
) -> None:
    job = make_job(endpoint_url=http_receiver.url)
    job.traceparent, job.send_trace_context = PRODUCER_TRACEPARENT, False
    await untraced.attempt(job)
    [post] = http_receiver.requests
    assert "traceparent" not in post.headers


async def test_untraced_an_event_without_trace_context_sends_none(
    untraced: WebhookSender, http_receiver: HttpReceiver
) -> None:
    await untraced.attempt(make_job(endpoint_url=http_receiver.url))
    [post] = http_receiver.requests
    assert "traceparent" not in post.headers
    assert "tracestate" not in post.headers
