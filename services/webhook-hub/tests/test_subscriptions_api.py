"""The subscription API: every rule of the spec, and the decisions where it says "not shown"."""

from __future__ import annotations

import base64

import httpx
from servicekit.testing import HttpReceiver
from servicekit.testing.app import serve_app
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine
from webhook_hub.app import create_app
from webhook_hub.settings import Settings

from tests.factories import consumer_subscribed, create_subscription, make_consumer, subscribe


async def test_create_answers_201_with_the_spec_fields_and_a_32_character_secret(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer = await make_consumer(db_engine, "write")
    response = await create_subscription(
        client, consumer.headers, http_receiver.url, ["order.paid", "order.created"]
    )
    assert response.status_code == 201
    body = response.json()
    assert {"id", "endpoint_url", "events", "secret", "created_at", "test_sent"} <= set(body)
    assert body["endpoint_url"] == http_receiver.url
    assert body["events"] == ["order.paid", "order.created"]
    assert body["test_sent"] is True
    assert len(body["secret"]) == 32
    assert len(base64.b64decode(body["secret"])) == 24
    assert body["is_active"] is True
    assert body["timeout_seconds"] == 10
    assert body["headers"] == {}
    assert body["failure_count"] == 0


async def test_create_probes_the_endpoint_and_reports_it(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer = await make_consumer(db_engine, "write")
    response = await create_subscription(client, consumer.headers, http_receiver.url)
    assert response.json()["probe"] == {"reachable": True, "status_code": 200, "error": None}
    assert http_receiver.requests[0].method == "HEAD"


async def test_an_unreachable_endpoint_is_still_subscribed(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    consumer = await make_consumer(db_engine, "write")
    response = await create_subscription(client, consumer.headers, "http://127.0.0.1:9/hooks")
    assert response.status_code == 201
    assert response.json()["probe"]["reachable"] is False


async def test_create_queues_a_test_delivery(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer, created = await consumer_subscribed(client, db_engine, http_receiver.url)
    deliveries = (
        await client.get(
            f"/webhooks/subscriptions/{created['id']}/deliveries", headers=consumer.headers
        )
    ).json()["data"]
    assert [d["event_type"] for d in deliveries] == ["webhook.test"]
    assert deliveries[0]["status"] == "pending"


async def test_unknown_event_types_are_422_naming_them_and_nothing_is_created(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer = await make_consumer(db_engine, "write")
    response = await create_subscription(
        client, consumer.headers, http_receiver.url, ["order.paid", "nope.never", "also.missing"]
    )
    assert response.status_code == 422
    body = response.json()
    assert "unknown event types" in body["error"].lower()
    assert body["invalid_events"] == ["also.missing", "nope.never"]
    listed = await client.get("/webhooks/subscriptions", headers=consumer.headers)
    assert listed.json()["data"] == []


async def test_an_inactive_event_type_cannot_be_subscribed(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer = await make_consumer(db_engine, "write")
    response = await create_subscription(
        client, consumer.headers, http_receiver.url, ["legacy.retired"]
    )
    assert response.status_code == 422
    assert response.json()["invalid_events"] == ["legacy.retired"]


async def test_the_wildcard_subscribes_to_everything(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer = await make_consumer(db_engine, "write")
    response = await create_subscription(client, consumer.headers, http_receiver.url, ["*"])
    assert response.status_code == 201
    assert response.json()["events"] == ["*"]


async def test_details_never_show_the_secret(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer, created = await consumer_subscribed(client, db_engine, http_receiver.url)
    details = await client.get(f"/webhooks/subscriptions/{created['id']}", headers=consumer.headers)
    assert details.status_code == 200
    assert "secret" not in details.json()
    assert "secret_old" not in details.json()
    assert created["secret"] not in details.text
    listing = await client.get("/webhooks/subscriptions", headers=consumer.headers)
    assert created["secret"] not in listing.text


async def test_list_pages_with_a_cursor_newest_first(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer = await make_consumer(db_engine, "write")
    ids = []
    for n in range(5):
        created = await create_subscription(client, consumer.headers, f"{http_receiver.url}/{n}")
        ids.append(created.json()["id"])
    first = (await client.get("/webhooks/subscriptions?limit=2", headers=consumer.headers)).json()
    assert [s["id"] for s in first["data"]] == ids[::-1][:2]
    seen = [s["id"] for s in first["data"]]
    cursor = first["next_cursor"]
    while cursor:
        page = (
            await client.get(
                f"/webhooks/subscriptions?limit=2&cursor={cursor}", headers=consumer.headers
            )
        ).json()
        seen += [s["id"] for s in page["data"]]
        cursor = page["next_cursor"]
    assert seen == ids[::-1]


async def test_list_filters_by_event_type_and_activity(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer = await make_consumer(db_engine, "write")

    async def create(events: list[str]) -> str:
        response = await create_subscription(client, consumer.headers, http_receiver.url, events)
        return str(response.json()["id"])

    paid, created, everything = (
        await create(["order.paid"]),
        await create(["order.created"]),
        await create(["*"]),
    )
    await client.patch(
        f"/webhooks/subscriptions/{created}", json={"is_active": False}, headers=consumer.headers
    )

    async def ids(query: str) -> set[str]:
        page = await client.get(f"/webhooks/subscriptions?{query}", headers=consumer.headers)
        return {s["id"] for s in page.json()["data"]}

    assert await ids("event_type=order.paid") == {paid, everything}
    assert await ids("is_active=false") == {created}
    assert await ids("is_active=true") == {paid, everything}


async def test_a_bad_cursor_is_a_400(client: httpx.AsyncClient, db_engine: AsyncEngine) -> None:
    consumer = await make_consumer(db_engine, "read")
    response = await client.get("/webhooks/subscriptions?cursor=garbage!", headers=consumer.headers)
    assert response.status_code == 400


async def test_patch_changes_the_given_fields_only(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer = await make_consumer(db_engine, "write")
    created = await subscribe(client, consumer.headers, http_receiver.url, description="first")
    response = await client.patch(
        f"/webhooks/subscriptions/{created['id']}",
        json={"events": ["order.created"], "timeout_seconds": 30, "headers": {"X-Team": "ops"}},
        headers=consumer.headers,
    )
    assert response.status_code == 200
    body = response.json()
    assert body["events"] == ["order.created"]
    assert body["timeout_seconds"] == 30
    assert body["headers"] == {"X-Team": "ops"}
    assert body["description"] == "first"
    assert body["endpoint_url"] == http_receiver.url


async def test_patch_validates_events_as_create_does(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer, created = await consumer_subscribed(client, db_engine, http_receiver.url)
    response = await client.patch(
        f"/webhooks/subscriptions/{created['id']}",
        json={"events": ["ghost.event"]},
        headers=consumer.headers,
    )
    assert response.status_code == 422
    assert response.json()["invalid_events"] == ["ghost.event"]
    unchanged = await client.get(
        f"/webhooks/subscriptions/{created['id']}", headers=consumer.headers
    )
    assert unchanged.json()["events"] == ["order.paid"]


async def test_patch_refuses_timeouts_outside_1_to_30_seconds(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer, created = await consumer_subscribed(client, db_engine, http_receiver.url)
    for bad in (0, 31, "ten"):
        response = await client.patch(
            f"/webhooks/subscriptions/{created['id']}",
            json={"timeout_seconds": bad},
            headers=consumer.headers,
        )
        assert response.status_code == 422


async def test_patch_is_active_true_re_enables_and_resets_failures(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer, created = await consumer_subscribed(client, db_engine, http_receiver.url)
    async with db_engine.begin() as conn:
        await conn.execute(
            text(
                "UPDATE subscriptions SET is_active = false, disabled_at = now(), "
                "failure_count = 100 WHERE id = :id"
            ),
            {"id": created["id"]},
        )
    response = await client.patch(
        f"/webhooks/subscriptions/{created['id']}",
        json={"is_active": True},
        headers=consumer.headers,
    )
    body = response.json()
    assert body["is_active"] is True
    assert body["disabled_at"] is None
    assert body["failure_count"] == 0


async def test_delete_answers_204_and_the_subscription_is_gone(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer, created = await consumer_subscribed(
        client, db_engine, http_receiver.url, level="admin"
    )
    response = await client.delete(
        f"/webhooks/subscriptions/{created['id']}", headers=consumer.headers
    )
    assert response.status_code == 204
    gone = await client.get(f"/webhooks/subscriptions/{created['id']}", headers=consumer.headers)
    assert gone.status_code == 404


async def test_delete_needs_the_admin_level(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    writer, created = await consumer_subscribed(client, db_engine, http_receiver.url)
    response = await client.delete(
        f"/webhooks/subscriptions/{created['id']}", headers=writer.headers
    )
    assert response.status_code == 403


async def test_a_read_key_cannot_create(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    reader = await make_consumer(db_engine, "read")
    response = await create_subscription(client, reader.headers, http_receiver.url)
    assert response.status_code == 403
    assert response.json()["code"] == "forbidden"


async def test_another_consumers_subscription_answers_404_everywhere(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    owner = await make_consumer(db_engine, "admin")
    stranger = await make_consumer(db_engine, "admin")
    sub_id = (await subscribe(client, owner.headers, http_receiver.url))["id"]
    base = f"/webhooks/subscriptions/{sub_id}"
    attempts = [
        await client.get(base, headers=stranger.headers),
        await client.patch(base, json={"description": "mine now"}, headers=stranger.headers),
        await client.post(f"{base}/test", headers=stranger.headers),
        await client.post(f"{base}/rotate-secret", headers=stranger.headers),
        await client.get(f"{base}/deliveries", headers=stranger.headers),
        await client.post(
            f"{base}/recover", json={"since": "2026-01-01T00:00:00Z"}, headers=stranger.headers
        ),
        await client.delete(base, headers=stranger.headers),
    ]
    assert [r.status_code for r in attempts] == [404] * len(attempts)
    assert all(sub_id not in r.text for r in attempts)
    still_there = await client.get(base, headers=owner.headers)
    assert still_there.json()["description"] is None
    listing = await client.get("/webhooks/subscriptions", headers=stranger.headers)
    assert listing.json()["data"] == []


async def test_rotation_returns_the_new_secret_valid_until_and_a_note(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer, created = await consumer_subscribed(client, db_engine, http_receiver.url)
    response = await client.post(
        f"/webhooks/subscriptions/{created['id']}/rotate-secret", headers=consumer.headers
    )
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"secret", "valid_until", "note"}
    assert len(body["secret"]) == 32
    assert body["secret"] != created["secret"]
    details = (
        await client.get(f"/webhooks/subscriptions/{created['id']}", headers=consumer.headers)
    ).json()
    from datetime import datetime, timedelta

    rotated = datetime.fromisoformat(details["secret_rotated_at"])
    valid_until = datetime.fromisoformat(body["valid_until"])
    assert abs((valid_until - rotated) - timedelta(minutes=10)) < timedelta(seconds=2)


async def test_rotation_needs_write_permission(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    writer = await make_consumer(db_engine, "write")
    reader = await make_consumer(db_engine, "read", owner=writer.owner)
    created = await subscribe(client, writer.headers, http_receiver.url)
    response = await client.post(
        f"/webhooks/subscriptions/{created['id']}/rotate-secret", headers=reader.headers
    )
    assert response.status_code == 403


async def test_send_test_queues_another_test_delivery(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer, created = await consumer_subscribed(client, db_engine, http_receiver.url)
    response = await client.post(
        f"/webhooks/subscriptions/{created['id']}/test", headers=consumer.headers
    )
    assert response.status_code == 202
    assert response.json()["test_sent"] is True
    deliveries = (
        await client.get(
            f"/webhooks/subscriptions/{created['id']}/deliveries", headers=consumer.headers
        )
    ).json()["data"]
    assert len(deliveries) == 2


async def test_event_types_lists_seeded_and_own_types(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    consumer = await make_consumer(db_engine, "read")
    response = await client.get("/webhooks/event-types", headers=consumer.headers)
    assert response.status_code == 200
    names = {t["name"]: t for t in response.json()["data"]}
    assert names["order.paid"]["example_payload"] == {"id": 1}
    assert names["legacy.retired"]["is_active"] is False


async def test_an_owner_beyond_its_subscription_cap_gets_409_and_nothing_is_created(
    service_settings: Settings, db_engine: AsyncEngine
) -> None:
    capped = service_settings.model_copy(update={"max_subscriptions_per_owner": 2})
    consumer = await make_consumer(db_engine, "write")
    async with serve_app(create_app(capped)) as client:
        for _ in range(2):
            await subscribe(client, consumer.headers, "http://127.0.0.1:9/hooks")
        response = await create_subscription(client, consumer.headers, "http://127.0.0.1:9/hooks")
        listed = await client.get("/webhooks/subscriptions", headers=consumer.headers)
    assert response.status_code == 409
    assert response.json()["code"] == "subscription_limit_reached"
    assert "2" in response.json()["error"]
    assert len(listed.json()["data"]) == 2


async def test_the_subscription_cap_defaults_to_the_specs_ten_thousand() -> None:
    assert Settings().max_subscriptions_per_owner == 10_000
