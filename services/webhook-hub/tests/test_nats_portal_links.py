"""`hub.subscriptions.portal-link` over real NATS: a service (scraper-manager) asks a one-time
portal link for one of its tenants, issued as the API's and the console's are; only for
tenants it subscribed, at read or write, for a minute to a day."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from nats.aio.client import Client as NatsClient
from servicekit.testing import HttpReceiver
from webhook_hub.settings import Settings

from tests.factories import csrf_in
from tests.test_nats_requests import ask, subscribe

LINK = re.compile(r"^(.+)(/portal/link/[A-Za-z0-9_-]+)$")


def link_request(tenant: str, **fields: Any) -> dict[str, Any]:
    return {"source": "scraper-manager", "tenant": tenant, **fields}


async def test_a_services_tenant_gets_a_link_that_signs_it_in_to_its_endpoints(
    worker: Settings,
    nats_client: NatsClient,
    http_receiver: HttpReceiver,
    client: httpx.AsyncClient,
) -> None:
    tenant = f"client-{uuid.uuid4().hex[:6]}"
    await subscribe(nats_client, tenant, http_receiver.url)
    reply = await ask(nats_client, "portal-link", link_request(tenant, level="write"))
    assert reply["ok"] is True, reply
    found = LINK.match(reply["url"])
    assert found, reply["url"]
    landing = await client.get(found.group(2))
    assert landing.status_code == 200
    assert tenant in landing.text
    assert "<strong>write</strong>" in landing.text
    opened = await client.post(found.group(2), data={"csrf_token": csrf_in(landing.text)})
    assert opened.status_code == 303
    endpoints = await client.get(opened.headers["location"])
    assert endpoints.status_code == 200
    assert http_receiver.url in endpoints.text


async def test_a_link_lasts_an_hour_by_default_and_opens_at_read(
    worker: Settings,
    nats_client: NatsClient,
    http_receiver: HttpReceiver,
    client: httpx.AsyncClient,
) -> None:
    tenant = f"client-{uuid.uuid4().hex[:6]}"
    await subscribe(nats_client, tenant, http_receiver.url)
    before = datetime.now(UTC)
    reply = await ask(nats_client, "portal-link", link_request(tenant))
    expires = datetime.fromisoformat(reply["expires_at"])
    assert timedelta(minutes=59) < expires - before <= timedelta(minutes=61)
    found = LINK.match(reply["url"])
    assert found
    assert found.group(1) == (worker.public_url or f"http://127.0.0.1:{worker.port}")
    landing = await client.get(found.group(2))
    assert "<strong>read</strong>" in landing.text


async def test_a_tenant_the_service_never_subscribed_gets_no_link(
    worker: Settings, nats_client: NatsClient, http_receiver: HttpReceiver
) -> None:
    """Neither an owner unknown to the hub nor one that only another source subscribed: a
    service speaks for its own tenants only, as its `list` and `delete` see only its own."""
    stranger = f"client-{uuid.uuid4().hex[:6]}"
    unknown = await ask(nats_client, "portal-link", link_request(stranger))
    assert (unknown["ok"], unknown["status"], unknown["code"]) == (False, 404, "tenant_not_found")
    subscribed = f"client-{uuid.uuid4().hex[:6]}"
    await subscribe(nats_client, subscribed, http_receiver.url)
    other_source = await ask(
        nats_client, "portal-link", {"source": "commerce-content", "tenant": subscribed}
    )
    assert (other_source["ok"], other_source["status"]) == (False, 404)


async def test_admin_and_a_lifetime_outside_a_minute_to_a_day_are_refused(
    worker: Settings, nats_client: NatsClient, http_receiver: HttpReceiver
) -> None:
    tenant = f"client-{uuid.uuid4().hex[:6]}"
    await subscribe(nats_client, tenant, http_receiver.url)
    for fields in ({"level": "admin"}, {"ttl_seconds": 59}, {"ttl_seconds": 86401}):
        reply = await ask(nats_client, "portal-link", link_request(tenant, **fields))
        assert (reply["ok"], reply["status"]) == (False, 422), fields
