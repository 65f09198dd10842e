"""Cloud metadata and link-local addresses are refused in every environment: at creation and
PATCH (422), at the creation probe and at delivery, after DNS. Outside production loopback
and private networks stay allowed (a developer's receivers run there)."""

from __future__ import annotations

import aiohttp
import httpx
import pytest
from servicekit.testing import HttpReceiver
from servicekit.testing.resolver import ScriptedResolver
from sqlalchemy.ext.asyncio import AsyncEngine
from webhook_hub.delivery_engine.endpoint_policy import EndpointGuard, EndpointRefused
from webhook_hub.delivery_engine.jobs import Failure
from webhook_hub.delivery_engine.sender import WebhookSender
from webhook_hub.settings import Settings
from webhook_hub.subscriptions.probe import EndpointProber

from tests.factories import create_subscription, make_consumer
from tests.job_factories import make_job

# Literals only: nothing is sent anywhere by these tests.
METADATA_URLS = [
    "http://169.254.169.254/latest/meta-data/",
    "http://[fd00:ec2::254]/latest/meta-data/",
    "http://100.100.100.200/latest/meta-data/",
    "http://169.254.1.1/hook",
    "http://[fe80::1]/hook",
    "http://[::ffff:169.254.169.254]/",
    "http://2852039166/latest/meta-data/",  # 169.254.169.254 as one number
]


def test_the_tests_run_outside_production(service_settings: Settings) -> None:
    """What the other tests here show holds for development, where the strict guard is off."""
    assert not service_settings.ssrf_guard_enabled


@pytest.mark.parametrize("url", METADATA_URLS)
async def test_a_metadata_or_link_local_endpoint_is_422_outside_production(
    client: httpx.AsyncClient, db_engine: AsyncEngine, url: str
) -> None:
    consumer = await make_consumer(db_engine, "write")
    response = await create_subscription(client, consumer.headers, url)
    assert response.status_code == 422, response.text
    assert response.json()["code"] == "endpoint_not_allowed"


async def test_a_metadata_endpoint_is_422_at_patch_outside_production(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer = await make_consumer(db_engine, "write")
    created = await create_subscription(client, consumer.headers, http_receiver.url)
    assert created.status_code == 201, created.text  # loopback stays allowed in development
    response = await client.patch(
        f"/webhooks/subscriptions/{created.json()['id']}",
        json={"endpoint_url": "http://169.254.169.254/latest/meta-data/"},
        headers=consumer.headers,
    )
    assert response.status_code == 422, response.text
    assert response.json()["code"] == "endpoint_not_allowed"


@pytest.mark.parametrize("url", ["http://10.1.2.3/hook", "http://[fd00::1]/hook"])
async def test_the_development_guard_allows_private_networks(url: str) -> None:
    await EndpointGuard(strict=False).check(url)


async def test_a_name_resolving_to_metadata_is_refused_outside_production() -> None:
    guard = EndpointGuard(strict=False, resolver=ScriptedResolver(["169.254.169.254"]))
    with pytest.raises(EndpointRefused, match="metadata"):
        await guard.check("http://metadata.google.internal/computeMetadata/v1/")


async def test_a_name_that_does_not_resolve_yet_is_accepted_outside_production() -> None:
    await EndpointGuard(strict=False, resolver=ScriptedResolver([None])).check(
        "http://later.test/hook"
    )


async def test_a_name_rebound_to_metadata_is_refused_at_delivery_outside_production(
    http_receiver: HttpReceiver,
) -> None:
    """Accepted when stored (it resolved to loopback), refused when it resolves to metadata
    at delivery: nothing is sent."""
    port = http_receiver.url.split(":")[2].split("/")[0]
    url = f"http://rebind.test:{port}/hook"
    resolver = ScriptedResolver(["127.0.0.1", "169.254.169.254"])
    guard = EndpointGuard(strict=False, resolver=resolver)
    await guard.check(url)
    sender = WebhookSender(user_agent="t", response_body_limit=4096, guard=guard)
    try:
        result = await sender.attempt(make_job(endpoint_url=url, timeout_seconds=2))
    finally:
        await sender.close()
    assert result.failure is Failure.REFUSED
    assert result.error is not None
    assert "metadata" in result.error
    assert http_receiver.requests == []


async def test_the_probe_reaching_a_name_rebound_to_metadata_is_refused(
    http_receiver: HttpReceiver,
) -> None:
    port = http_receiver.url.split(":")[2].split("/")[0]
    guard = EndpointGuard(strict=False, resolver=ScriptedResolver(["169.254.169.254"]))
    async with aiohttp.ClientSession(connector=guard.connector()) as http:
        probe = await EndpointProber(http, 2).probe(f"http://rebind.test:{port}/hook")
    assert probe.reachable is False
    assert "metadata" in (probe.error or "")
    assert http_receiver.requests == []
