"""Bad input gets a clear 4xx in the envelope and changes nothing; SSRF refusals in production."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import httpx
import pytest
from servicekit.testing import HttpReceiver, serve_app
from sqlalchemy.ext.asyncio import AsyncEngine
from webhook_hub.app import create_app
from webhook_hub.delivery_engine.endpoint_policy import EndpointGuard, EndpointRefused
from webhook_hub.delivery_engine.jobs import StoredDelivery
from webhook_hub.delivery_engine.sender import WebhookSender
from webhook_hub.settings import Settings

from tests.factories import create_subscription, make_consumer, subscription_body


@pytest.mark.parametrize(
    "url",
    [
        "ftp://example.com/hook",
        "/relative/path",
        "example.com/hook",
        "http://",
        "https://user:pass@example.com/hook",
        "https://example.com/" + "a" * 2048,
        "https://exa mple.com/hook",
        "http://127.0.0.1:99999/hook",
        "http://127.0.0.1:0/hook",
    ],
)
async def test_endpoint_url_must_be_absolute_http_within_2048_characters(
    client: httpx.AsyncClient, db_engine: AsyncEngine, url: str
) -> None:
    consumer = await make_consumer(db_engine, "write")
    response = await create_subscription(client, consumer.headers, url)
    assert response.status_code == 422
    assert response.json()["code"] == "validation_error"


@pytest.mark.parametrize("url", ["http://127.0.0.1:99999/hook", "http://127.0.0.1:0/hook"])
async def test_a_patched_endpoint_url_with_an_impossible_port_is_422_naming_the_field(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver, url: str
) -> None:
    consumer = await make_consumer(db_engine, "write")
    created = await create_subscription(client, consumer.headers, http_receiver.url)
    assert created.status_code == 201, created.text
    response = await client.patch(
        f"/webhooks/subscriptions/{created.json()['id']}",
        json={"endpoint_url": url},
        headers=consumer.headers,
    )
    assert response.status_code == 422, response.text
    assert "endpoint_url" in response.json()["error"]


@pytest.mark.parametrize(
    "headers",
    [
        {"webhook-signature": "v1,forged"},
        {"Webhook-Id": "x"},
        {"Content-Type": "text/plain"},
        {"Host": "evil.example"},
        {"Content-Length": "1"},
        {"Bad Name": "x"},
        {"X-Ok": "line\r\nInjected: yes"},
    ],
)
async def test_custom_headers_cannot_override_ours_or_smuggle_lines(
    client: httpx.AsyncClient,
    db_engine: AsyncEngine,
    http_receiver: HttpReceiver,
    headers: dict[str, str],
) -> None:
    consumer = await make_consumer(db_engine, "write")
    response = await client.post(
        "/webhooks/subscriptions",
        json=subscription_body(http_receiver.url, headers=headers),
        headers=consumer.headers,
    )
    assert response.status_code == 422


async def test_body_over_256_kib_is_413(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer = await make_consumer(db_engine, "write")
    response = await create_subscription(
        client, consumer.headers, http_receiver.url, description="x" * (300 * 1024)
    )
    assert response.status_code == 413
    assert response.json()["code"] == "payload_too_large"


@pytest.mark.parametrize(
    "content",
    [b"{not json", b"[]", b'"a string"', b'{"endpoint_url": 5, "events": "order.paid"}', b""],
)
async def test_malformed_bodies_and_wrong_types_are_422_never_500(
    client: httpx.AsyncClient, db_engine: AsyncEngine, content: bytes
) -> None:
    consumer = await make_consumer(db_engine, "write")
    response = await client.post(
        "/webhooks/subscriptions",
        content=content,
        headers={**consumer.headers, "content-type": "application/json"},
    )
    assert response.status_code == 422
    assert set(response.json()) >= {"error", "code"}


async def test_unknown_fields_are_refused(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer = await make_consumer(db_engine, "write")
    response = await create_subscription(
        client, consumer.headers, http_receiver.url, secret="my-own-secret"
    )
    assert response.status_code == 422


async def test_an_empty_event_list_is_refused(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer = await make_consumer(db_engine, "write")
    response = await client.post(
        "/webhooks/subscriptions",
        json={"endpoint_url": http_receiver.url, "events": []},
        headers=consumer.headers,
    )
    assert response.status_code == 422


async def test_a_malformed_subscription_id_is_422(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    consumer = await make_consumer(db_engine, "read")
    response = await client.get("/webhooks/subscriptions/not-a-uuid", headers=consumer.headers)
    assert response.status_code == 422


@pytest.fixture
async def production_client(
    service_settings: Settings,
) -> AsyncIterator[httpx.AsyncClient]:
    settings = service_settings.model_copy(update={"env": "production", "ssrf_protection": None})
    async with serve_app(create_app(settings)) as http:
        yield http


# Only loopback addresses are ever used over HTTP here: a test must never send traffic to a
# private range, even by mistake. Private literals are checked by the guard alone below.
@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:9/hook", "http://localhost:9/hook", "http://[::1]:9/hook"]
)
async def test_production_refuses_loopback_endpoints(
    production_client: httpx.AsyncClient, db_engine: AsyncEngine, url: str
) -> None:
    consumer = await make_consumer(db_engine, "write")
    response = await create_subscription(production_client, consumer.headers, url)
    assert response.status_code == 422
    assert response.json()["code"] == "endpoint_not_allowed"


@pytest.mark.parametrize(
    "url",
    [
        "http://10.1.2.3/hook",
        "http://172.16.0.1/hook",
        "http://192.168.0.10/hook",
        "http://169.254.169.254/latest/meta-data",
        "http://[fd00::1]/hook",
        "http://[::ffff:10.0.0.1]/hook",
        "http://224.0.0.1/hook",
        "http://0.0.0.0/hook",
    ],
)
async def test_the_guard_classifies_private_reserved_and_metadata_addresses(url: str) -> None:
    """IP literals resolve locally: nothing is sent anywhere."""
    with pytest.raises(EndpointRefused, match="private or reserved"):
        await EndpointGuard().check(url)


async def test_the_guard_allows_configured_networks() -> None:
    await EndpointGuard(["10.0.0.0/8"]).check("http://10.1.2.3/hook")


async def test_allowed_networks_let_development_endpoints_through(
    service_settings: Settings, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    settings = service_settings.model_copy(
        update={"env": "production", "allowed_networks": ["127.0.0.0/8"]}
    )
    consumer = await make_consumer(db_engine, "write")
    async with serve_app(create_app(settings)) as http:
        response = await create_subscription(http, consumer.headers, http_receiver.url)
    assert response.status_code == 201


async def test_the_guard_is_checked_again_at_delivery_time(http_receiver: HttpReceiver) -> None:
    """DNS can change after creation: the sender refuses without sending anything."""
    job = StoredDelivery(
        delivery_id=uuid.uuid4(),
        subscription_id=uuid.uuid4(),
        event_type="order.paid",
        event_time=datetime.now(UTC),
        payload_json=b"{}",
        attempts=0,
        endpoint_url=http_receiver.url,
        secrets=["MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"],
        headers={},
        timeout_seconds=2,
    )
    guarded = WebhookSender(user_agent="t", response_body_limit=4096, guard=EndpointGuard())
    result = await guarded.attempt(job)
    assert result.status_code is None
    assert result.error is not None
    assert result.error.startswith("refused")
    assert http_receiver.requests == []
