"""The delivery engine end to end: NATS event -> dispatch -> signed POST -> outcome recorded."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from servicekit.embedded.smtp import SmtpServer
from servicekit.testing import HttpReceiver
from servicekit.testing.receiver import PlannedResponse, ReceivedRequest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine
from standardwebhooks import Webhook, WebhookVerificationError
from webhook_hub.settings import Settings

from tests.factories import (
    Delivering,
    make_consumer,
    non_test,
    running_worker,
    subscribe,
    subscription_body,
    wait_for_posts,
)


def verified(secret: str, request: ReceivedRequest) -> dict[str, Any]:
    return dict(Webhook(secret).verify(request.body, request.headers))


async def wait_for_event_type(
    client: httpx.AsyncClient, headers: dict[str, str], name: str, timeout: float = 10.0
) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        listed = await client.get("/webhooks/event-types", headers=headers)
        if name in {t["name"] for t in listed.json()["data"]}:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"event type {name!r} was not registered within {timeout} s")


async def subscription_row(engine: AsyncEngine, sub_id: str) -> Any:
    async with engine.connect() as conn:
        return (
            await conn.execute(text("SELECT * FROM subscriptions WHERE id = :id"), {"id": sub_id})
        ).one()


async def test_test_event_is_delivered_signed_on_creation(
    worker: Settings,
    delivering: Delivering,
) -> None:
    _, created = await delivering.subscribed()  # the probe, then the test event
    post = next(r for r in delivering.receiver.requests if r.method == "POST")
    body = verified(created["secret"], post)
    assert body["type"] == "webhook.test"
    assert body["data"]["subscription_id"] == created["id"]


async def test_an_event_reaches_every_matching_subscription_signed_and_shaped(
    worker: Settings,
    delivering: Delivering,
) -> None:
    consumer = await make_consumer(delivering.engine, "write")
    url, headers = delivering.receiver.url, consumer.headers
    exact = await subscribe(delivering.client, headers, f"{url}/exact", ["order.paid"])
    wildcard = await subscribe(delivering.client, headers, f"{url}/all", ["*"])
    other = await subscribe(delivering.client, headers, f"{url}/other", ["order.created"])
    event = await delivering.publish("order.paid", {"id": 42, "status": "paid", "total": "9.99"})
    posts = await delivering.posts(2)
    await asyncio.sleep(0.3)
    assert {p.path for p in delivering.non_test()} == {"/exact", "/all"}
    secrets = {"/exact": exact["secret"], "/all": wildcard["secret"]}
    for post in posts:
        body = verified(secrets[post.path], post)
        assert body["type"] == "order.paid"
        assert body["data"] == {"id": 42, "status": "paid", "total": "9.99"}
        assert body["timestamp"].endswith("Z")
        assert post.headers["content-type"] == "application/json"
        assert post.headers["user-agent"].startswith("webhook-hub/")
        assert post.headers["webhook-id"].startswith("msg_")
    assert other["id"]
    assert event.id


async def test_an_events_data_is_sent_and_stored_as_its_producer_wrote_it(
    worker: Settings,
    delivering: Delivering,
) -> None:
    """Even a number past a float's range: read into Python and written out again it became
    `Infinity`, which PostgreSQL's `json` refused, so its outcome could never be recorded."""
    consumer, created = await delivering.subscribed(["order.paid"])
    data = b'{"amount": 1e400, "note" : "caf\\u00e9"}'
    event_id = str(uuid.uuid4())
    envelope = (
        b'{"specversion":"1.0","id":"' + event_id.encode() + b'","source":"tests",'
        b'"type":"order.paid","time":"2026-11-27T07:00:00Z","data":' + data + b"}"
    )
    await delivering.js.publish("events.order.paid", envelope, headers={"Nats-Msg-Id": event_id})
    [post] = await delivering.posts(1)
    verified(created["secret"], post)
    assert post.body.endswith(b',"data":' + data + b"}")
    # Recorded, and the worker goes on with the next event.
    await delivering.publish("order.paid", {"id": 2})
    await delivering.posts(2)
    deliveries = await delivering.recorded(
        consumer, created["id"], "status=succeeded&event_type=order.paid", 2
    )
    assert len([d for d in deliveries if d["event_type"] == "order.paid"]) == 2


async def test_an_answer_holding_a_nul_byte_is_recorded_and_the_worker_goes_on(
    worker: Settings,
    delivering: Delivering,
) -> None:
    """PostgreSQL's text cannot hold NUL: kept as it came, the answer made the whole batch of
    outcomes unwritable, retried for ever."""
    consumer, created = await delivering.subscribed(["order.paid"])
    delivering.receiver.default = PlannedResponse(200, b"ok\x00done")
    await delivering.publish("order.paid", {"id": 1})
    await delivering.publish("order.paid", {"id": 2})
    await delivering.posts(2)
    await asyncio.sleep(0.8)
    deliveries = await delivering.deliveries(consumer, created["id"], "status=succeeded")
    paid = [d for d in deliveries if d["event_type"] == "order.paid"]
    assert len(paid) == 2
    detail = await delivering.detail(consumer, paid[0]["id"])
    assert detail["attempt_log"][0]["response_body"] == "ok\ufffddone"


async def test_custom_headers_are_sent_with_each_delivery(
    worker: Settings,
    delivering: Delivering,
) -> None:
    consumer = await make_consumer(delivering.engine, "write")
    response = await delivering.client.post(
        "/webhooks/subscriptions",
        json=subscription_body(delivering.receiver.url, headers={"X-Api-Token": "abc123"}),
        headers=consumer.headers,
    )
    assert response.status_code == 201
    await delivering.publish("order.paid", {"id": 1})
    posts = await delivering.posts(1)
    assert posts[0].headers["x-api-token"] == "abc123"


async def test_events_with_a_tenant_reach_only_that_consumers_subscriptions(
    worker: Settings,
    delivering: Delivering,
) -> None:
    alice = await make_consumer(delivering.engine, "write")
    bob = await make_consumer(delivering.engine, "write")
    url = delivering.receiver.url
    await subscribe(delivering.client, alice.headers, f"{url}/alice", ["run.completed"])
    await subscribe(delivering.client, bob.headers, f"{url}/bob", ["run.completed"])
    await delivering.publish("run.completed", {"run_id": 1}, tenant=alice.owner)
    await delivering.posts(1)
    await asyncio.sleep(0.5)
    assert [p.path for p in delivering.non_test()] == ["/alice"]


async def test_a_failing_receiver_gets_the_same_webhook_id_until_it_succeeds(
    worker: Settings,
    delivering: Delivering,
) -> None:
    # The probe and the test event are both answered 200.
    consumer, created = await delivering.subscribed(["order.created"])
    delivering.receiver.respond_with(500, 502, 500)
    await delivering.publish("order.created", {"id": 7})
    posts = await delivering.posts(4)
    assert len({p.headers["webhook-id"] for p in posts}) == 1
    for post in posts:
        verified(created["secret"], post)
    await asyncio.sleep(0.5)
    deliveries = await delivering.deliveries(consumer, created["id"], "event_type=order.created")
    assert len(deliveries) == 1
    assert deliveries[0]["status"] == "succeeded"
    assert deliveries[0]["attempts"] == 4
    detail = await delivering.detail(consumer, deliveries[0]["id"])
    assert [a["status_code"] for a in detail["attempt_log"]] == [500, 502, 500, 200]
    sub = await subscription_row(delivering.engine, created["id"])
    assert sub.failure_count == 0
    assert sub.last_delivery_at is not None


async def test_a_delivery_that_never_succeeds_ends_failed_after_the_schedule(
    worker: Settings,
    delivering: Delivering,
) -> None:
    consumer, created = await delivering.subscribed(["order.created"])
    delivering.receiver.default = PlannedResponse(500, b"broken")
    await delivering.publish("order.created", {"id": 8})
    attempts = len(worker.retry_schedule_seconds) + 1
    await delivering.posts(attempts)
    deliveries = await delivering.recorded(consumer, created["id"], "status=failed", 1)
    assert len(delivering.non_test()) == attempts
    assert len(deliveries) == 1
    assert deliveries[0]["attempts"] == attempts
    sub = await subscription_row(delivering.engine, created["id"])
    assert sub.failure_count == attempts
    detail = await delivering.detail(consumer, deliveries[0]["id"])
    assert detail["attempt_log"][0]["response_body"] == "broken"


async def test_response_bodies_are_kept_to_4_kib(
    worker: Settings,
    delivering: Delivering,
) -> None:
    consumer, created = await delivering.subscribed(["order.created"])
    delivering.receiver.respond_with(PlannedResponse(200, b"y" * 10_000))
    await delivering.publish("order.created", {"id": 9})
    await delivering.posts(1)
    await asyncio.sleep(0.5)
    delivery = (await delivering.deliveries(consumer, created["id"], "event_type=order.created"))[0]
    detail = await delivering.detail(consumer, delivery["id"])
    assert len(detail["attempt_log"][0]["response_body"]) == 4096


async def test_410_gone_disables_the_subscription_at_once(
    worker: Settings,
    delivering: Delivering,
) -> None:
    _, created = await delivering.subscribed(["order.created"])
    delivering.receiver.respond_with(410)
    await delivering.publish("order.created", {"id": 10})
    await delivering.posts(1)
    # The outcome is recorded a flush after the answer: on a loaded machine, more than 0.5 s.
    for _ in range(100):
        sub = await subscription_row(delivering.engine, created["id"])
        if not sub.is_active:
            break
        await asyncio.sleep(0.1)
    assert sub.is_active is False
    assert sub.disabled_at is not None
    assert "410" in sub.disabled_reason
    assert len(delivering.non_test()) == 1


async def test_429_with_retry_after_waits_as_asked(
    worker: Settings,
    delivering: Delivering,
) -> None:
    consumer, created = await delivering.subscribed(["order.created"])
    delivering.receiver.respond_with(PlannedResponse(429, headers={"Retry-After": "120"}))
    await delivering.publish("order.created", {"id": 11})
    await delivering.posts(1)
    await asyncio.sleep(0.5)
    delivery = (await delivering.deliveries(consumer, created["id"], "event_type=order.created"))[0]
    assert delivery["status"] == "pending"
    wait = datetime.fromisoformat(delivery["next_attempt_at"]) - datetime.fromisoformat(
        delivery["last_attempt_at"]
    )
    assert timedelta(seconds=119) <= wait <= timedelta(seconds=121)


async def test_100_consecutive_failures_disable_mail_the_owner_and_publish_an_event(
    fast_settings: Settings, delivering: Delivering, smtp_server: SmtpServer
) -> None:
    # Each event gets one attempt, so 100 events make 100 consecutive failures (the circuit
    # breaker, which would hold most of them after its first failures, opens beyond that).
    settings = fast_settings.model_copy(
        update={
            "retry_schedule_seconds": [],
            "smtp_url": smtp_server.url,
            "circuit_breaker_failures": 1000,
        }
    )
    client, url = delivering.client, delivering.receiver.url
    async with running_worker(settings):
        consumer = await make_consumer(delivering.engine, "write", email="owner@consumer.example")
        # The worker registers its own `subscription.disabled` type as it starts: wait for it,
        # or subscribing to it races the worker's first sync.
        await wait_for_event_type(client, consumer.headers, "subscription.disabled")
        watcher = await subscribe(
            client, consumer.headers, f"{url}/watcher", ["subscription.disabled"]
        )
        created = await subscribe(client, consumer.headers, f"{url}/failing", ["order.created"])
        disabled_events = await delivering.js.pull_subscribe(
            "events.subscription.disabled", stream="EVENTS"
        )
        await asyncio.sleep(0.5)

        delivering.receiver.default = PlannedResponse(500)
        for n in range(100):
            await delivering.publish("order.created", {"id": n})
        for _ in range(300):
            sub = await subscription_row(delivering.engine, created["id"])
            if not sub.is_active:
                break
            await asyncio.sleep(0.1)
        assert sub.is_active is False
        assert sub.failure_count == 100
        assert sub.disabled_at is not None

        mails = await asyncio.to_thread(smtp_server.wait_for, 1, 20.0)
        assert mails[0].recipients == ("owner@consumer.example",)
        assert created["id"] in mails[0].text
        assert "disabled" in mails[0].subject.lower()

        messages = await disabled_events.fetch(10, timeout=10)
        bodies = [json.loads(m.data) for m in messages]
        mine = [b for b in bodies if b["data"]["subscription_id"] == created["id"]]
        assert mine
        assert mine[0]["tenant"] == consumer.owner
        assert mine[0]["data"]["failure_count"] == 100
        assert watcher["id"]


async def test_rotation_signs_with_both_secrets_inside_the_window_and_new_only_after(
    worker: Settings,
    delivering: Delivering,
) -> None:
    consumer, created = await delivering.subscribed(["order.created"])
    old = created["secret"]
    new = (
        await delivering.client.post(
            f"/webhooks/subscriptions/{created['id']}/rotate-secret", headers=consumer.headers
        )
    ).json()["secret"]
    await delivering.publish("order.created", {"id": 1})
    inside = (await delivering.posts(1))[0]
    assert inside.headers["webhook-signature"].count("v1,") == 2
    verified(new, inside)
    verified(old, inside)

    # Eleven minutes later, as far as the subscription knows.
    async with delivering.engine.begin() as conn:
        await conn.execute(
            text(
                "UPDATE subscriptions SET secret_rotated_at = now() - interval '11 minutes'"
                " WHERE id = :id"
            ),
            {"id": created["id"]},
        )
    await delivering.publish("order.created", {"id": 2})
    after = (await delivering.posts(2))[1]
    assert after.headers["webhook-signature"].count("v1,") == 1
    verified(new, after)
    with pytest.raises(WebhookVerificationError):
        verified(old, after)


async def test_a_deleted_subscription_gets_no_more_deliveries(
    worker: Settings,
    delivering: Delivering,
) -> None:
    consumer, created = await delivering.subscribed(["order.created"], level="admin")
    await delivering.client.delete(
        f"/webhooks/subscriptions/{created['id']}", headers=consumer.headers
    )
    await delivering.publish("order.created", {"id": 3})
    await asyncio.sleep(1.0)
    assert delivering.non_test() == []


async def test_manual_retry_and_recover_send_failed_deliveries_again(
    worker: Settings,
    delivering: Delivering,
) -> None:
    consumer, created = await delivering.subscribed(["order.created"])
    attempts = len(worker.retry_schedule_seconds) + 1
    delivering.receiver.default = PlannedResponse(500)
    since = datetime.now(UTC).isoformat()
    await delivering.publish("order.created", {"id": 1})
    await delivering.publish("order.created", {"id": 2})
    await delivering.posts(2 * attempts)
    failed = await delivering.recorded(consumer, created["id"], "status=failed", 2)
    assert len(failed) == 2

    delivering.receiver.default = PlannedResponse(200)
    retried = await delivering.client.post(
        f"/webhooks/deliveries/{failed[0]['id']}/retry", headers=consumer.headers
    )
    assert retried.status_code == 202
    await delivering.posts(2 * attempts + 1)

    recovered = await delivering.client.post(
        f"/webhooks/subscriptions/{created['id']}/recover",
        json={"since": since},
        headers=consumer.headers,
    )
    assert recovered.status_code == 202
    assert recovered.json() == {"recovered": 1}
    await delivering.posts(2 * attempts + 2)
    await asyncio.sleep(0.5)
    statuses = await delivering.deliveries(consumer, created["id"], "event_type=order.created")
    assert {d["status"] for d in statuses} == {"succeeded"}


async def test_redelivered_events_do_not_make_a_second_delivery(
    worker: Settings,
    delivering: Delivering,
) -> None:
    from servicekit.events import CloudEvent

    await delivering.subscribed(["order.created"])
    event = CloudEvent(source="tests", type="order.created", data={"id": 5})
    js = delivering.js
    await js.publish(event.subject, event.to_json(), headers={"Nats-Msg-Id": str(event.id)})
    # The same event again under another message id, as a publisher retrying past the window.
    await js.publish(event.subject, event.to_json(), headers={"Nats-Msg-Id": f"{uuid.uuid4()}"})
    await delivering.posts(1)
    await asyncio.sleep(1.0)
    assert len(delivering.non_test()) == 1


async def test_a_slow_endpoint_does_not_delay_other_subscriptions(
    fast_settings: Settings, delivering: Delivering
) -> None:
    slow, fast = HttpReceiver(), HttpReceiver()
    await slow.start()
    await fast.start()
    settings = fast_settings.model_copy(update={"per_subscription_concurrency": 2})
    try:
        async with running_worker(settings):
            consumer = await make_consumer(delivering.engine, "write")
            await subscribe(delivering.client, consumer.headers, slow.url, ["order.paid"])
            await subscribe(delivering.client, consumer.headers, fast.url, ["order.paid"])
            await slow.wait_for(2)
            await fast.wait_for(2)
            slow.default = PlannedResponse(200, delay=3.0)
            for n in range(20):
                await delivering.publish("order.paid", {"n": n})
            started = asyncio.get_running_loop().time()
            await wait_for_posts(fast, 20, timeout=10)
            fast_done = asyncio.get_running_loop().time() - started
            # The slow endpoint holds at most its two slots; the fast one is not queued
            # behind it.
            assert fast_done < 3.0
            assert len(non_test(slow.requests)) <= 2
    finally:
        await slow.stop()
        await fast.stop()


async def test_deliveries_held_up_by_a_slow_endpoint_are_stored_and_sent_by_the_claim_loop(
    fast_settings: Settings, delivering: Delivering
) -> None:
    # One slot, and a short queue: most of the burst waits too long and is set aside.
    settings = fast_settings.model_copy(
        update={"per_subscription_concurrency": 1, "dispatch_queue_seconds": 0.2}
    )
    consumer = await make_consumer(delivering.engine, "write")
    created = await subscribe(
        delivering.client, consumer.headers, delivering.receiver.url, ["order.paid"]
    )
    delivering.receiver.default = PlannedResponse(200, delay=0.3)
    async with running_worker(settings):
        for n in range(6):
            await delivering.publish("order.paid", {"n": n})
        posts = await delivering.posts(6, timeout=20)
        await asyncio.sleep(0.5)
    numbers = sorted(verified(created["secret"], post)["data"]["n"] for post in posts)
    assert numbers == list(range(6))  # each once
    deliveries = await delivering.deliveries(consumer, created["id"], "event_type=order.paid")
    assert {d["status"] for d in deliveries} == {"succeeded"}
    async with delivering.engine.connect() as conn:
        set_aside = await conn.scalar(
            text(
                "SELECT count(*) FROM deliveries WHERE subscription_id = :id"
                " AND event_type = 'order.paid' AND created_at < last_attempt_at"
            ),
            {"id": created["id"]},
        )
    assert set_aside > 0  # stored before their first attempt


async def test_events_still_being_worked_on_are_not_handed_to_another_worker(
    fast_settings: Settings, delivering: Delivering
) -> None:
    from webhook_hub.dispatch.loop import DISPATCH_CONSUMER

    # One event is answered slowly (three ack waits of 2 s: the notices, every 0.5 s, leave
    # room for a loaded machine's stalls), the next waits for its slot; with that
    # one waiting, the worker fetches nothing more. Only its in-progress notices keep
    # JetStream from handing both out again: the test pulls from the same consumer, as a
    # second worker would, and must get nothing.
    settings = fast_settings.model_copy(
        update={
            "dispatch_ack_wait_seconds": 2.0,
            "per_subscription_concurrency": 1,
            "dispatch_backlog": 1,
            "dispatch_queue_seconds": 30.0,
        }
    )
    consumer = await make_consumer(delivering.engine, "write")
    created = await subscribe(
        delivering.client, consumer.headers, delivering.receiver.url, ["order.paid"]
    )
    await delivering.receiver.wait_for(1)
    delivering.receiver.default = PlannedResponse(200, delay=6.0)
    async with running_worker(settings):
        await asyncio.sleep(1.0)
        for n in range(2):
            await delivering.publish("order.paid", {"n": n})
        await delivering.posts(1)
        delivering.receiver.default = PlannedResponse(200)
        other_worker = await delivering.js.pull_subscribe_bind(DISPATCH_CONSUMER, stream="EVENTS")
        with pytest.raises(TimeoutError):
            await other_worker.fetch(1, timeout=6.5)
        await other_worker.unsubscribe()
        posts = await delivering.posts(2)
        await asyncio.sleep(0.5)
    assert sorted(verified(created["secret"], p)["data"]["n"] for p in posts) == [0, 1]
    assert len(delivering.non_test()) == 2
    deliveries = await delivering.deliveries(consumer, created["id"], "event_type=order.paid")
    assert [d["status"] for d in deliveries] == ["succeeded", "succeeded"]
