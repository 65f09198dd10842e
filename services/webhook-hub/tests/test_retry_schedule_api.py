"""Retry schedule and timeout per subscription, and an owner's defaults, through the API:
what is accepted, what is refused (422 naming the field and entry), and what is read back
(what is set, and what is in effect with where it comes from)."""

from __future__ import annotations

import httpx
import pytest
from servicekit.testing import HttpReceiver
from sqlalchemy.ext.asyncio import AsyncEngine
from webhook_hub.settings import Settings
from webhook_hub.subscriptions.retry_settings import format_duration

from tests.factories import consumer_subscribed, create_subscription, make_consumer, subscribe

DEFAULTS = "/webhooks/consumers/me/defaults"


def service_schedule(settings: Settings) -> list[str]:
    return [format_duration(s) for s in settings.retry_schedule_seconds]


async def test_a_subscription_created_with_a_schedule_and_timeout_reads_them_back(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer = await make_consumer(db_engine, "write")
    created = await subscribe(
        client,
        consumer.headers,
        http_receiver.url,
        retry_schedule=["5s", "60s", "10m", "1h30m"],
        timeout_seconds=4,
    )
    read = await client.get(f"/webhooks/subscriptions/{created['id']}", headers=consumer.headers)
    body = read.json()
    assert body["retry_schedule"] == ["5s", "1m", "10m", "90m"]
    assert body["timeout_seconds"] == 4
    assert body["in_effect"] == {
        "retry_schedule": ["5s", "1m", "10m", "90m"],
        "retry_schedule_from": "subscription",
        "timeout_seconds": 4,
        "timeout_seconds_from": "subscription",
    }
    assert created["in_effect"] == body["in_effect"]


async def test_a_subscription_that_sets_nothing_reads_the_services_values_in_effect(
    client: httpx.AsyncClient,
    db_engine: AsyncEngine,
    http_receiver: HttpReceiver,
    service_settings: Settings,
) -> None:
    _, created = await consumer_subscribed(client, db_engine, http_receiver.url)
    # Today's readers keep reading a number: the spec's default of 10.
    assert created["timeout_seconds"] == 10
    assert created["retry_schedule"] is None
    assert created["in_effect"] == {
        "retry_schedule": service_schedule(service_settings),
        "retry_schedule_from": "service_default",
        "timeout_seconds": 10,
        "timeout_seconds_from": "service_default",
    }


async def test_patch_sets_a_schedule_and_null_unsets_it_and_the_timeout(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer = await make_consumer(db_engine, "write")
    created = await subscribe(client, consumer.headers, http_receiver.url, timeout_seconds=25)
    url = f"/webhooks/subscriptions/{created['id']}"
    patched = await client.patch(url, json={"retry_schedule": ["1m"]}, headers=consumer.headers)
    assert patched.status_code == 200
    assert (patched.json()["retry_schedule"], patched.json()["timeout_seconds"]) == (["1m"], 25)
    cleared = await client.patch(
        url, json={"retry_schedule": None, "timeout_seconds": None}, headers=consumer.headers
    )
    body = cleared.json()
    assert body["retry_schedule"] is None
    assert body["in_effect"]["retry_schedule_from"] == "service_default"
    assert (body["timeout_seconds"], body["in_effect"]["timeout_seconds_from"]) == (
        10,
        "service_default",
    )


async def test_an_empty_schedule_is_kept_as_no_retries(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer = await make_consumer(db_engine, "write")
    created = await subscribe(client, consumer.headers, http_receiver.url, retry_schedule=[])
    assert created["retry_schedule"] == []
    assert created["in_effect"]["retry_schedule_from"] == "subscription"


@pytest.mark.parametrize(
    ("schedule", "location", "says"),
    [
        (["5s", "5x"], ["body", "retry_schedule", "1"], "not a duration"),
        (["0s"], ["body", "retry_schedule", "0"], "longer than 0s"),
        (["5s", 30], ["body", "retry_schedule", "1"], "string"),
        (["1s"] * 21, ["body", "retry_schedule"], "at most 20"),
        (["4d", "3d", "1m"], ["body", "retry_schedule"], "7 days"),
        ("5s", ["body", "retry_schedule"], "list"),
    ],
)
async def test_a_bad_schedule_is_a_422_naming_the_field_and_the_entry(
    client: httpx.AsyncClient,
    db_engine: AsyncEngine,
    http_receiver: HttpReceiver,
    schedule: object,
    location: list[object],
    says: str,
) -> None:
    consumer = await make_consumer(db_engine, "write")
    response = await create_subscription(
        client, consumer.headers, http_receiver.url, retry_schedule=schedule
    )
    assert response.status_code == 422
    [detail] = response.json()["details"]
    assert detail["loc"] == location
    assert says in detail["msg"]
    assert ".".join(str(part) for part in location) in response.json()["error"]


async def test_patch_refuses_a_bad_entry_and_keeps_the_schedule(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer = await make_consumer(db_engine, "write")
    created = await subscribe(client, consumer.headers, http_receiver.url, retry_schedule=["1m"])
    url = f"/webhooks/subscriptions/{created['id']}"
    response = await client.patch(
        url, json={"retry_schedule": ["1m", "soon"]}, headers=consumer.headers
    )
    assert response.status_code == 422
    assert response.json()["details"][0]["loc"] == ["body", "retry_schedule", "1"]
    assert (await client.get(url, headers=consumer.headers)).json()["retry_schedule"] == ["1m"]


async def test_another_owners_subscription_is_a_404_to_patch(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    owner = await make_consumer(db_engine, "write")
    stranger = await make_consumer(db_engine, "write")
    created = await subscribe(client, owner.headers, http_receiver.url, retry_schedule=["1m"])
    url = f"/webhooks/subscriptions/{created['id']}"
    response = await client.patch(url, json={"retry_schedule": ["1s"]}, headers=stranger.headers)
    assert response.status_code == 404
    assert (await client.get(url, headers=stranger.headers)).status_code == 404
    assert (await client.get(url, headers=owner.headers)).json()["retry_schedule"] == ["1m"]


async def test_an_owner_without_defaults_reads_the_services(
    client: httpx.AsyncClient, db_engine: AsyncEngine, service_settings: Settings
) -> None:
    consumer = await make_consumer(db_engine, "read")
    response = await client.get(DEFAULTS, headers=consumer.headers)
    assert response.status_code == 200
    assert response.json() == {
        "retry_schedule": None,
        "timeout_seconds": None,
        "in_effect": {
            "retry_schedule": service_schedule(service_settings),
            "retry_schedule_from": "service_default",
            "timeout_seconds": 10,
            "timeout_seconds_from": "service_default",
        },
    }


async def test_owner_defaults_apply_to_the_subscriptions_that_set_nothing(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer, following = await consumer_subscribed(client, db_engine, http_receiver.url)
    own = await subscribe(
        client, consumer.headers, http_receiver.url, retry_schedule=["5s"], timeout_seconds=3
    )
    put = await client.put(
        DEFAULTS,
        json={"retry_schedule": ["1m", "1h"], "timeout_seconds": 20},
        headers=consumer.headers,
    )
    assert put.status_code == 200
    assert (put.json()["retry_schedule"], put.json()["timeout_seconds"]) == (["1m", "1h"], 20)
    listed = await client.get("/webhooks/subscriptions", headers=consumer.headers)
    effects = {s["id"]: s["in_effect"] for s in listed.json()["data"]}
    assert effects[following["id"]] == {
        "retry_schedule": ["1m", "1h"],
        "retry_schedule_from": "owner_default",
        "timeout_seconds": 20,
        "timeout_seconds_from": "owner_default",
    }
    assert effects[own["id"]]["retry_schedule_from"] == "subscription"
    assert effects[own["id"]]["timeout_seconds"] == 3
    assert (await client.get(DEFAULTS, headers=consumer.headers)).json() == put.json()


async def test_put_replaces_both_defaults_an_absent_one_is_unset(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    consumer = await make_consumer(db_engine, "write")
    await client.put(
        DEFAULTS, json={"retry_schedule": ["1m"], "timeout_seconds": 20}, headers=consumer.headers
    )
    response = await client.put(DEFAULTS, json={"timeout_seconds": 5}, headers=consumer.headers)
    assert (response.json()["retry_schedule"], response.json()["timeout_seconds"]) == (None, 5)


async def test_defaults_are_each_owners_own(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    one, other = await make_consumer(db_engine, "write"), await make_consumer(db_engine, "write")
    await client.put(DEFAULTS, json={"retry_schedule": ["1m"]}, headers=one.headers)
    assert (await client.get(DEFAULTS, headers=other.headers)).json()["retry_schedule"] is None


async def test_setting_defaults_needs_the_write_level(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    reader = await make_consumer(db_engine, "read")
    response = await client.put(DEFAULTS, json={"timeout_seconds": 5}, headers=reader.headers)
    assert response.status_code == 403


@pytest.mark.parametrize(
    ("body", "location"),
    [
        ({"retry_schedule": ["1m", "1y"]}, ["body", "retry_schedule", "1"]),
        ({"timeout_seconds": 31}, ["body", "timeout_seconds"]),
        ({"timeout_seconds": 0}, ["body", "timeout_seconds"]),
        ({"timeout": 5}, ["body", "timeout"]),
    ],
)
async def test_bad_defaults_are_a_422_naming_the_field(
    client: httpx.AsyncClient,
    db_engine: AsyncEngine,
    body: dict[str, object],
    location: list[object],
) -> None:
    consumer = await make_consumer(db_engine, "write")
    response = await client.put(DEFAULTS, json=body, headers=consumer.headers)
    assert response.status_code == 422
    assert response.json()["details"][0]["loc"] == location
