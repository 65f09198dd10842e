"""The NATS request/reply service scraper-manager uses to subscribe its clients."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from nats.aio.client import Client as NatsClient
from servicekit.db.engine import create_session_factory
from servicekit.testing import HttpReceiver
from sqlalchemy.ext.asyncio import AsyncEngine
from standardwebhooks import Webhook
from webhook_hub.event_types.repository import EventTypeRepository
from webhook_hub.models import Delivery, DeliveryStatus
from webhook_hub.settings import Settings

from tests.factories import nats_create_request


async def ask(nc: NatsClient, action: str, payload: dict[str, Any]) -> dict[str, Any]:
    reply = await nc.request(f"hub.subscriptions.{action}", json.dumps(payload).encode(), timeout=5)
    return dict(json.loads(reply.data))


async def subscribe(nc: NatsClient, tenant: str, url: str) -> dict[str, Any]:
    """A `run.completed` subscription of scraper-manager's `tenant`, made over NATS."""
    return await ask(
        nc,
        "create",
        {
            "source": "scraper-manager",
            "tenant": tenant,
            "endpoint_url": url,
            "events": ["run.completed"],
        },
    )


async def test_create_makes_a_subscription_owned_by_the_tenant_with_its_secret(
    worker: Settings, nats_client: NatsClient, http_receiver: HttpReceiver
) -> None:
    tenant = f"client-{uuid.uuid4().hex[:6]}"
    reply = await ask(
        nats_client,
        "create",
        {
            "source": "scraper-manager",
            "tenant": tenant,
            "endpoint_url": http_receiver.url,
            "events": ["run.completed", "run.failed"],
        },
    )
    assert reply["ok"] is True
    record = reply["subscription"]
    assert len(record["secret"]) == 32
    assert record["events"] == ["run.completed", "run.failed"]
    test_event = next(r for r in await http_receiver.wait_for(1) if r.method == "POST")
    Webhook(record["secret"]).verify(test_event.body, test_event.headers)


async def test_create_refuses_event_types_of_another_service(
    worker: Settings, nats_client: NatsClient, http_receiver: HttpReceiver
) -> None:
    reply = await ask(
        nats_client,
        "create",
        {
            "source": "scraper-manager",
            "tenant": "client-x",
            "endpoint_url": http_receiver.url,
            "events": ["run.completed", "order.paid"],
        },
    )
    assert reply["ok"] is False
    assert reply["status"] == 422
    assert reply["invalid_events"] == ["order.paid"]


async def test_create_refuses_the_wildcard(
    worker: Settings, nats_client: NatsClient, http_receiver: HttpReceiver
) -> None:
    reply = await ask(
        nats_client,
        "create",
        {
            "source": "scraper-manager",
            "tenant": "c",
            "endpoint_url": http_receiver.url,
            "events": ["*"],
        },
    )
    assert reply["ok"] is False
    assert reply["invalid_events"] == ["*"]


async def test_list_and_delete_see_only_the_tenants_own_subscriptions(
    worker: Settings, nats_client: NatsClient, http_receiver: HttpReceiver
) -> None:
    mine, theirs = f"client-{uuid.uuid4().hex[:6]}", f"client-{uuid.uuid4().hex[:6]}"
    base = {
        "source": "scraper-manager",
        "endpoint_url": http_receiver.url,
        "events": ["run.completed"],
    }
    created = await ask(nats_client, "create", {**base, "tenant": mine})
    await ask(nats_client, "create", {**base, "tenant": theirs})

    listed = await ask(nats_client, "list", {"source": "scraper-manager", "tenant": mine})
    assert [s["id"] for s in listed["subscriptions"]] == [created["subscription"]["id"]]
    assert "secret" not in listed["subscriptions"][0]

    sub_id = created["subscription"]["id"]
    stranger = await ask(
        nats_client, "delete", {"source": "scraper-manager", "tenant": theirs, "id": sub_id}
    )
    assert stranger["ok"] is False
    assert stranger["status"] == 404
    deleted = await ask(
        nats_client, "delete", {"source": "scraper-manager", "tenant": mine, "id": sub_id}
    )
    assert deleted == {"ok": True}
    assert (await ask(nats_client, "list", {"source": "scraper-manager", "tenant": mine}))[
        "subscriptions"
    ] == []


async def test_malformed_requests_get_a_422_reply(
    worker: Settings, nats_client: NatsClient
) -> None:
    reply = await ask(nats_client, "create", {"tenant": "no-source"})
    assert reply["ok"] is False
    assert reply["status"] == 422
    raw = await nats_client.request("hub.subscriptions.create", b"{not json", timeout=5)
    assert json.loads(raw.data)["status"] == 422


async def test_create_refuses_types_consumers_registered(
    worker: Settings, nats_client: NatsClient, http_receiver: HttpReceiver, db_engine: AsyncEngine
) -> None:
    name = f"consumer.thing{uuid.uuid4().hex[:6]}"
    async with create_session_factory(db_engine)() as session, session.begin():
        registered = await EventTypeRepository(session).register("someone", name, "", {}, {})
    assert registered is not None
    reply = await ask(
        nats_client,
        "create",
        {
            "source": "api",
            "tenant": "client-y",
            "endpoint_url": http_receiver.url,
            "events": [name],
        },
    )
    assert reply["ok"] is False
    assert reply["invalid_events"] == [name]


async def test_deliveries_answers_the_last_outcomes_of_the_tenants_own_subscription(
    worker: Settings, nats_client: NatsClient, http_receiver: HttpReceiver, db_engine: AsyncEngine
) -> None:
    mine = f"client-{uuid.uuid4().hex[:6]}"
    created = await subscribe(nats_client, mine, http_receiver.url)
    sub_id = uuid.UUID(created["subscription"]["id"])
    # Later than the delivery of the hub's own test event, so these four are the newest.
    start = datetime.now(UTC).replace(second=0, microsecond=0) + timedelta(days=1)
    outcomes = [(DeliveryStatus.SUCCEEDED, 1, 200), (DeliveryStatus.FAILED, 8, 500)]
    async with create_session_factory(db_engine)() as session, session.begin():
        for n, (status, attempts, code) in enumerate(outcomes * 2):
            session.add(
                Delivery(
                    subscription_id=sub_id,
                    event_id=uuid.uuid4(),
                    event_type="run.completed",
                    payload={"n": n},
                    status=status,
                    attempts=attempts,
                    last_status_code=code,
                    next_attempt_at=None,
                    created_at=start + timedelta(minutes=n),
                )
            )
    ask_mine = {"source": "scraper-manager", "tenant": mine, "id": str(sub_id), "limit": 3}

    reply = await ask(nats_client, "deliveries", ask_mine)

    assert reply["ok"] is True
    assert [(d["status"], d["attempts"], d["last_status_code"]) for d in reply["deliveries"]] == [
        ("failed", 8, 500),
        ("succeeded", 1, 200),
        ("failed", 8, 500),
    ]
    newest = datetime.fromisoformat(reply["deliveries"][0]["created_at"])
    assert newest == start + timedelta(minutes=3)
    assert set(reply["deliveries"][0]) == {
        "id",
        "event_type",
        "status",
        "attempts",
        "last_status_code",
        "created_at",
    }


async def test_deliveries_of_another_tenants_or_sources_subscription_are_404(
    worker: Settings, nats_client: NatsClient, http_receiver: HttpReceiver
) -> None:
    mine, theirs = f"client-{uuid.uuid4().hex[:6]}", f"client-{uuid.uuid4().hex[:6]}"
    created = await subscribe(nats_client, mine, http_receiver.url)
    sub_id = created["subscription"]["id"]
    for source, tenant in (("scraper-manager", theirs), ("api", mine)):
        reply = await ask(
            nats_client, "deliveries", {"source": source, "tenant": tenant, "id": sub_id}
        )
        assert reply["ok"] is False
        assert reply["status"] == 404


async def test_deliveries_refuses_more_than_fifty_at_once(
    worker: Settings, nats_client: NatsClient
) -> None:
    reply = await ask(
        nats_client,
        "deliveries",
        {"source": "scraper-manager", "tenant": "c", "id": str(uuid.uuid4()), "limit": 51},
    )
    assert reply["ok"] is False
    assert reply["status"] == 422


async def test_create_takes_a_retry_schedule_and_timeout_and_list_reads_them_back(
    worker: Settings, nats_client: NatsClient, http_receiver: HttpReceiver
) -> None:
    request = nats_create_request(
        http_receiver.url, retry_schedule=["30s", "120s"], timeout_seconds=5
    )
    tenant = request["tenant"]
    created = await ask(nats_client, "create", request)
    assert created["ok"] is True
    assert (
        created["subscription"]["retry_schedule"],
        created["subscription"]["timeout_seconds"],
    ) == (
        ["30s", "2m"],
        5,
    )
    listed = await ask(nats_client, "list", {"source": "scraper-manager", "tenant": tenant})
    [record] = listed["subscriptions"]
    assert (record["retry_schedule"], record["timeout_seconds"]) == (["30s", "2m"], 5)


async def test_create_without_them_reads_the_timeout_in_effect(
    worker: Settings, nats_client: NatsClient, http_receiver: HttpReceiver
) -> None:
    created = await subscribe(nats_client, f"client-{uuid.uuid4().hex[:6]}", http_receiver.url)
    assert (
        created["subscription"]["retry_schedule"],
        created["subscription"]["timeout_seconds"],
    ) == (
        None,
        10,
    )


async def test_create_refuses_a_bad_wait_naming_the_field_and_entry(
    worker: Settings, nats_client: NatsClient, http_receiver: HttpReceiver
) -> None:
    reply = await ask(
        nats_client,
        "create",
        nats_create_request(http_receiver.url, retry_schedule=["30s", "later"]),
    )
    assert (reply["ok"], reply["status"]) == (False, 422)
    assert "retry_schedule.1" in reply["error"]
