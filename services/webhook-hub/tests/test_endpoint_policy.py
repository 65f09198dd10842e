"""webhook-hub's endpoint guard is servicekit's shared address policy: every internal form is
refused, and the sender connects only to the address that was checked."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import aiohttp
import pytest
from aiohttp import web
from servicekit.testing.resolver import ScriptedResolver
from webhook_hub.delivery_engine.jobs import DeliveryJob
from webhook_hub.delivery_engine.sender import WebhookSender
from webhook_hub.subscriptions.endpoint_policy import (
    EndpointGuard,
    EndpointRefused,
    check_headers,
)

# Literals only: the guard decides without sending anything anywhere.
INTERNAL = [
    "http://[::1]/hook",
    "http://169.254.169.254/latest/meta-data/iam/",
    "http://100.100.100.200/latest/meta-data/",
    "http://100.64.0.1/hook",
    "http://100.127.255.254/hook",
    "http://192.0.0.192/opc/v2/",
    "http://[2002:7f00:1::]/hook",
    "http://[2002:a9fe:a9fe::]/hook",
    "http://[64:ff9b::7f00:1]/hook",
    "http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/hook",
    "http://[::ffff:127.0.0.1]/hook",
    "http://2130706433/hook",
    "http://0x7f.1/hook",
    "http://0177.0.0.1/hook",
]


@pytest.mark.parametrize("url", INTERNAL)
async def test_the_guard_refuses_every_internal_address_form(url: str) -> None:
    with pytest.raises(EndpointRefused):
        await EndpointGuard().check(url)


async def test_metadata_stays_refused_inside_an_allowed_network() -> None:
    with pytest.raises(EndpointRefused):
        await EndpointGuard(["169.254.0.0/16"]).check("http://169.254.169.254/")


@pytest.mark.parametrize("name", ["Transfer-Encoding", "Connection", "Metadata-Flavor"])
def test_transport_and_metadata_headers_are_refused(name: str) -> None:
    with pytest.raises(EndpointRefused):
        check_headers({name: "x"})


@pytest.fixture
async def internal_receiver() -> AsyncIterator[tuple[int, list[str]]]:
    """A receiver on 127.0.0.2 (standing for an internal address) and the port it shares with
    one on 127.0.0.1 (standing for the public address the guard allows)."""
    hits: list[str] = []

    async def handle(request: web.Request) -> web.Response:
        hits.append(request.host)
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_post("/hook", handle)
    public = web.AppRunner(app, access_log=None)
    await public.setup()
    await web.TCPSite(public, "127.0.0.1", 0).start()
    port = int(public.addresses[0][1])
    internal_app = web.Application()
    internal_app.router.add_post("/hook", handle)
    internal = web.AppRunner(internal_app, access_log=None)
    await internal.setup()
    await web.TCPSite(internal, "127.0.0.2", port).start()
    yield port, hits
    await public.cleanup()
    await internal.cleanup()


def job_for(url: str) -> DeliveryJob:
    return DeliveryJob(
        delivery_id=uuid.uuid4(),
        subscription_id=uuid.uuid4(),
        event_type="order.paid",
        event_time=datetime.now(UTC),
        payload={},
        attempts=0,
        endpoint_url=url,
        secrets=["MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"],
        headers={},
        timeout_seconds=2,
    )


async def test_the_sender_refuses_a_name_whose_answer_changes_after_the_check(
    internal_receiver: tuple[int, list[str]],
) -> None:
    port, hits = internal_receiver
    resolver = ScriptedResolver(["127.0.0.1", "127.0.0.2"])
    guard = EndpointGuard(["127.0.0.1/32"], resolver=resolver)
    async with aiohttp.ClientSession(connector=guard.connector(use_dns_cache=False)) as http:
        sender = WebhookSender(http, user_agent="t", response_body_limit=4096, guard=guard)
        result = await sender.attempt(job_for(f"http://rebind.test:{port}/hook"))
    assert resolver.lookups == ["rebind.test", "rebind.test"]
    assert result.status_code is None
    assert (result.error or "").startswith("refused")
    assert hits == []


async def test_the_sender_delivers_to_the_address_it_checked(
    internal_receiver: tuple[int, list[str]],
) -> None:
    port, hits = internal_receiver
    resolver = ScriptedResolver(["127.0.0.1", "127.0.0.2"])
    guard = EndpointGuard(["127.0.0.1/32"], resolver=resolver)
    async with aiohttp.ClientSession(connector=guard.connector(use_dns_cache=False)) as http:
        sender = WebhookSender(http, user_agent="t", response_body_limit=4096, guard=None)
        result = await sender.attempt(job_for(f"http://rebind.test:{port}/hook"))
    assert result.status_code == 200
    assert resolver.lookups == ["rebind.test"]
    assert hits == [f"rebind.test:{port}"]


async def test_the_guard_remembers_a_bounded_number_of_checked_endpoints() -> None:
    """Each distinct endpoint checked adds an entry; the oldest go past the bound, so the
    memory does not grow with the number of endpoints ever seen."""
    guard = EndpointGuard(["127.0.0.0/8"], max_remembered=100)
    for port in range(1000, 1500):
        await guard.check(f"http://127.0.0.1:{port}/hook")
    assert guard.remembered == 100
