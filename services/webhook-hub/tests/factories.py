"""Test data for webhook-hub."""

from __future__ import annotations

import asyncio
import html
import json
import os
import re
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
from nats.js import JetStreamContext
from playwright.async_api import Locator, Page
from servicekit.auth import AccessLevel
from servicekit.auth.repository import ApiKeyRepository
from servicekit.db.engine import create_session_factory
from servicekit.events import CloudEvent
from servicekit.testing import HttpReceiver
from servicekit.testing.browser import BrowserPage, axe_violations, describe_violations, screenshots
from servicekit.testing.receiver import ReceivedRequest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine
from webhook_hub.settings import Settings
from webhook_hub.worker import run as run_worker


class Consumer:
    """A consumer with a key; `headers` authenticates as it."""

    def __init__(self, owner: str, key: str) -> None:
        self.owner = owner
        self.key = key

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"}


async def make_consumer(
    engine: AsyncEngine, level: str = "admin", email: str | None = None, owner: str | None = None
) -> Consumer:
    owner = owner or f"consumer-{uuid.uuid4().hex[:8]}"
    async with create_session_factory(engine)() as session, session.begin():
        _, key = await ApiKeyRepository(session).create(
            prefix="whk", owner=owner, level=AccessLevel(level), email=email
        )
    return Consumer(owner, key)


def unique_type_name(name: str) -> str:
    """`name` made unique: type names are global and the tests share one database."""
    return f"{name}-{uuid.uuid4().hex[:8]}"


async def registered_type(
    client: httpx.AsyncClient,
    consumer: Consumer,
    name: str,
    description: str,
    example_payload: dict[str, Any],
) -> str:
    """An event type registered through the API under `unique_type_name(name)`; that name."""
    unique = unique_type_name(name)
    registered = await client.post(
        "/webhooks/event-types",
        json={"name": unique, "description": description, "example_payload": example_payload},
        headers=consumer.headers,
    )
    assert registered.status_code in (200, 201), registered.text
    return unique


def subscription_body(url: str, events: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    return {"endpoint_url": url, "events": events or ["order.paid"], **extra}


async def publish_event(
    js: JetStreamContext, event_type: str, data: dict[str, Any], tenant: str | None = None
) -> CloudEvent:
    event = CloudEvent(source="tests", type=event_type, data=data, tenant=tenant)
    await js.publish(event.subject, event.to_json(), headers={"Nats-Msg-Id": str(event.id)})
    return event


async def subscribe(
    client: httpx.AsyncClient,
    headers: dict[str, str],
    url: str,
    events: list[str] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """Create a subscription through the API; the 201 body."""
    response = await create_subscription(client, headers, url, events, **extra)
    assert response.status_code == 201, response.text
    return dict(response.json())


async def create_subscription(
    client: httpx.AsyncClient,
    headers: dict[str, str],
    url: str,
    events: list[str] | None = None,
    **extra: Any,
) -> httpx.Response:
    """`POST /webhooks/subscriptions`, its answer as it is (for the refusals)."""
    return await client.post(
        "/webhooks/subscriptions", json=subscription_body(url, events, **extra), headers=headers
    )


async def consumer_subscribed(
    client: httpx.AsyncClient,
    engine: AsyncEngine,
    url: str,
    events: list[str] | None = None,
    level: str = "write",
    **extra: Any,
) -> tuple[Consumer, dict[str, Any]]:
    """A new consumer of `level` and its subscription of `url` (the API's 201 body)."""
    consumer = await make_consumer(engine, level)
    return consumer, await subscribe(client, consumer.headers, url, events, **extra)


async def receiving_subscription(
    client: httpx.AsyncClient,
    engine: AsyncEngine,
    receiver: HttpReceiver,
    events: list[str] | None = None,
    level: str = "write",
    **extra: Any,
) -> tuple[Consumer, dict[str, Any]]:
    """`consumer_subscribed` to `receiver`, once the running worker's probe and test event
    have reached it (so what it receives next is the test's)."""
    consumer, created = await consumer_subscribed(
        client, engine, receiver.url, events, level, **extra
    )
    await receiver.wait_for(2)
    return consumer, created


def non_test(requests: list[ReceivedRequest]) -> list[ReceivedRequest]:
    """The POSTs that are not a subscription's test event."""
    return [r for r in requests if r.method == "POST" and b'"webhook.test"' not in r.body]


async def wait_for_posts(
    receiver: HttpReceiver, count: int, timeout: float = 15.0
) -> list[ReceivedRequest]:
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        posts = non_test(receiver.requests)
        if len(posts) >= count:
            return posts
        await asyncio.sleep(0.05)
    raise AssertionError(f"expected {count} deliveries, got {len(non_test(receiver.requests))}")


async def published_and_posted(
    js: JetStreamContext,
    receiver: HttpReceiver,
    event_type: str,
    datas: list[dict[str, Any]],
    count: int,
) -> list[ReceivedRequest]:
    """Each of `datas` published as an `event_type` event, then the receiver's non-test
    POSTs once there are `count` of them."""
    for data in datas:
        await publish_event(js, event_type, data)
    return await wait_for_posts(receiver, count)


def nats_create_request(url: str, events: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    """A `hub.subscriptions.create` request of a new scraper-manager tenant."""
    return {
        "source": "scraper-manager",
        "tenant": f"client-{uuid.uuid4().hex[:6]}",
        "endpoint_url": url,
        "events": events or ["run.completed"],
        **extra,
    }


def worker_process(settings: Settings, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """`webhook-hub worker` as a process of its own on the test database and NATS, with
    `env` (its settings for the test) on top."""
    return subprocess.Popen(
        [str(Path(sys.executable).parent / "webhook-hub"), "worker"],
        env={
            **os.environ,
            "WEBHOOK_HUB_DATABASE_URL": settings.database_url,
            "WEBHOOK_HUB_NATS_URL": settings.nats_url,
            "WEBHOOK_HUB_DELIVERY_POLL_SECONDS": "0.2",
            "WEBHOOK_HUB_LOG_LEVEL": "WARNING",
            **env,
        },
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def stop_processes(*processes: subprocess.Popen[bytes]) -> None:
    """SIGTERM to each process, then each waited for, killed past 20 s."""
    for process in processes:
        process.send_signal(signal.SIGTERM)
    for process in processes:
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()


@dataclass
class Delivering:
    """What a delivery test drives: the hub's API (`client`), its database, a real HTTP
    receiver and JetStream (a worker fixture runs the engine beside)."""

    client: httpx.AsyncClient
    engine: AsyncEngine
    receiver: HttpReceiver
    js: JetStreamContext

    async def subscribed(
        self, events: list[str] | None = None, level: str = "write", **extra: Any
    ) -> tuple[Consumer, dict[str, Any]]:
        """`receiving_subscription` of a new consumer of `level` to the receiver."""
        return await receiving_subscription(
            self.client, self.engine, self.receiver, events, level, **extra
        )

    async def published_and_posted(
        self, event_type: str, datas: list[dict[str, Any]], count: int
    ) -> list[ReceivedRequest]:
        """`published_and_posted` to this receiver."""
        return await published_and_posted(self.js, self.receiver, event_type, datas, count)

    async def publish(
        self, event_type: str, data: dict[str, Any], tenant: str | None = None
    ) -> CloudEvent:
        return await publish_event(self.js, event_type, data, tenant)

    async def posts(self, count: int, timeout: float = 15.0) -> list[ReceivedRequest]:
        """`wait_for_posts` on this receiver."""
        return await wait_for_posts(self.receiver, count, timeout)

    def non_test(self) -> list[ReceivedRequest]:
        """The receiver's POSTs so far that are not a test event."""
        return non_test(self.receiver.requests)

    async def deliveries(
        self, consumer: Consumer, subscription_id: str, query: str = ""
    ) -> list[dict[str, Any]]:
        """`deliveries_of` the subscription, as `consumer`."""
        return await deliveries_of(self.client, consumer.headers, subscription_id, query)

    async def recorded(
        self, consumer: Consumer, subscription_id: str, query: str, count: int
    ) -> list[dict[str, Any]]:
        """`recorded_deliveries` of the subscription, as `consumer`."""
        return await recorded_deliveries(
            self.client, consumer.headers, subscription_id, query, count
        )

    async def detail(self, consumer: Consumer, delivery_id: str) -> dict[str, Any]:
        """`delivery_detail`, as `consumer`."""
        return await delivery_detail(self.client, consumer.headers, delivery_id)


@asynccontextmanager
async def running_worker(settings: Settings) -> AsyncIterator[Settings]:
    """The whole worker (relay, dispatch, delivery, mail, NATS service) in this process."""
    stop = asyncio.Event()
    task = asyncio.create_task(run_worker(settings, stop))
    await asyncio.sleep(0.5)
    try:
        yield settings
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)


async def deliveries_of(
    client: httpx.AsyncClient, headers: dict[str, str], subscription_id: str, query: str = ""
) -> list[dict[str, Any]]:
    """One page of a subscription's delivery log (`query`: `status=...`, `event_type=...`)."""
    response = await client.get(
        f"/webhooks/subscriptions/{subscription_id}/deliveries?{query}", headers=headers
    )
    return list(response.json()["data"])


async def recorded_deliveries(
    client: httpx.AsyncClient,
    headers: dict[str, str],
    subscription_id: str,
    query: str,
    count: int,
    timeout: float = 10.0,
) -> list[dict[str, Any]]:
    """`deliveries_of` once it holds `count` deliveries (or after `timeout` seconds): an
    outcome is recorded a flush after its answer, later than that on a loaded machine."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        found = await deliveries_of(client, headers, subscription_id, query)
        if len(found) >= count or asyncio.get_running_loop().time() > deadline:
            return found
        await asyncio.sleep(0.1)


async def delivery_detail(
    client: httpx.AsyncClient, headers: dict[str, str], delivery_id: str
) -> dict[str, Any]:
    response = await client.get(f"/webhooks/deliveries/{delivery_id}", headers=headers)
    return dict(response.json())


def csrf_in(html: str) -> str:
    """The CSRF token of a page's form."""
    found = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert found, "no CSRF field on the page"
    return found.group(1)


async def signed_in(client: httpx.AsyncClient, consumer: Consumer) -> str:
    """Sign `client` in with the consumer's key; a CSRF token for its forms."""
    form = await client.get("/portal/login")
    token = csrf_in(form.text)
    response = await client.post(
        "/portal/login", data={"api_key": consumer.key, "next": "", "csrf_token": token}
    )
    assert response.status_code == 303
    return token


async def signed_in_as_new(
    client: httpx.AsyncClient, engine: AsyncEngine, level: str = "write"
) -> tuple[Consumer, str]:
    """A new consumer of `level`, signed in to the portal on `client`; a CSRF token."""
    consumer = await make_consumer(engine, level)
    return consumer, await signed_in(client, consumer)


async def signed_in_with_endpoint(
    client: httpx.AsyncClient,
    engine: AsyncEngine,
    url: str,
    events: list[str] | None = None,
    **extra: Any,
) -> tuple[Consumer, dict[str, Any], str]:
    """A new "write" consumer with a subscription of `url`, signed in to the portal on
    `client`; the consumer, the API's 201 body and a CSRF token for the portal's forms."""
    consumer, created = await consumer_subscribed(client, engine, url, events, **extra)
    return consumer, created, await signed_in(client, consumer)


def chart_of(page: str, chart_id: str) -> dict[str, Any]:
    """The JSON a portal page hands `charts.js` for the chart with this id."""
    found = re.search(rf'id="{chart_id}" data-chart=\'([^\']+)\'', page)
    assert found, chart_id
    return dict(json.loads(html.unescape(found.group(1))))


async def set_deliveries(
    engine: AsyncEngine, subscription_id: str, rows: list[tuple[str, timedelta]]
) -> None:
    """Deliveries of `subscription_id` with these statuses, created this long ago."""
    async with engine.begin() as connection:
        for status, age in rows:
            await connection.execute(
                text(
                    "INSERT INTO deliveries (id, subscription_id, event_id, event_type, payload,"
                    " event_time, status, attempts, created_at) VALUES (:id, :sid, :eid,"
                    " 'order.paid', '{}', now(), :status, 1, now() - :age)"
                ),
                {
                    "id": uuid.uuid4(),
                    "sid": subscription_id,
                    "eid": uuid.uuid4(),
                    "status": status,
                    "age": age,
                },
            )


async def only_test_delivery_settled(engine: AsyncEngine, subscription_id: str) -> None:
    """The creation's test delivery, marked succeeded, so counts below are only the test's."""
    async with engine.begin() as connection:
        await connection.execute(
            text(
                "UPDATE deliveries SET status = 'succeeded', created_at = now() - interval '30 days'"
                " WHERE subscription_id = :sid"
            ),
            {"sid": subscription_id},
        )


# --- the portal in a real browser ----------------------------------------------------------


async def assert_clean(watched: BrowserPage, name: str, screenshot_dir: Path) -> None:
    """Accessible (axe-core) at 1280 and 390 px, screenshotted, and nothing blocked, refused
    by the CSP or thrown."""
    for width in (1280, 390):
        await watched.page.set_viewport_size({"width": width, "height": 900})
        violations = await axe_violations(watched.page)
        assert not violations, f"{name} at {width}px:\n{describe_violations(violations)}"
    await screenshots(watched.page, screenshot_dir, name)
    assert watched.blocked_requests == []
    assert watched.csp_violations == []
    assert watched.page_errors == []


async def both_schemes(watched: BrowserPage, name: str, screenshot_dir: Path) -> None:
    """axe-clean at 1280 and 390 px in light and dark, screenshotted in both."""
    await assert_clean(watched, name, screenshot_dir)
    await watched.page.emulate_media(color_scheme="dark")
    await assert_clean(watched, f"{name}-dark", screenshot_dir)
    await watched.page.emulate_media(color_scheme="light")


async def link_for(hub: httpx.AsyncClient, consumer: Consumer) -> str:
    response = await hub.post("/webhooks/portal-links", json={}, headers=consumer.headers)
    assert response.status_code == 201
    return str(response.json()["url"])


async def open_portal(watched: BrowserPage, hub: httpx.AsyncClient, consumer: Consumer) -> None:
    await watched.page.goto(await link_for(hub, consumer))
    await watched.page.get_by_role("button", name="Continue to the webhooks portal").click()
    await watched.page.get_by_role("heading", name="Endpoints").wait_for()


@dataclass
class PortalInBrowser:
    """The portal in a real Chromium (`watched`) against the hub's processes (`hub`)."""

    watched: BrowserPage
    hub: httpx.AsyncClient
    engine: AsyncEngine
    screenshot_dir: Path

    @property
    def page(self) -> Page:
        return self.watched.page

    async def endpoint(
        self, url: str, events: list[str] | None = None, **extra: Any
    ) -> tuple[Consumer, dict[str, Any]]:
        """A new "write" consumer and its subscription of `url`, made through the API."""
        return await consumer_subscribed(self.hub, self.engine, url, events, **extra)

    async def signed_in(self, level: str = "write") -> Consumer:
        """A new consumer of `level`, signed in through a portal link."""
        consumer = await make_consumer(self.engine, level)
        await open_portal(self.watched, self.hub, consumer)
        return consumer

    async def open(self, consumer: Consumer) -> None:
        """Signed in as `consumer` through a portal link, on the endpoints page."""
        await open_portal(self.watched, self.hub, consumer)

    async def open_endpoint(self, consumer: Consumer, subscription_id: str) -> None:
        """Signed in as `consumer` (a portal link), on the subscription's page."""
        await open_portal(self.watched, self.hub, consumer)
        await self.page.goto(f"{self.hub.base_url}/portal/endpoints/{subscription_id}")

    async def log_rows(self) -> Locator:
        """The rows of the page's delivery log that link to a delivery, once there is one."""
        rows = self.page.locator("#deliveries tr", has=self.page.locator("a"))
        await rows.first.wait_for()
        return rows

    async def endpoint_opened(
        self, url: str, events: list[str] | None = None, **extra: Any
    ) -> tuple[Consumer, dict[str, Any]]:
        """`endpoint`, then signed in as its consumer on its page."""
        consumer, created = await self.endpoint(url, events, **extra)
        await self.open_endpoint(consumer, created["id"])
        return consumer, created

    async def filtered_rows(self, url_glob: str) -> Locator:
        """`log_rows` after the log's Filter button, once the page's URL matches `url_glob`."""
        await self.page.get_by_role("button", name="Filter").click()
        await self.page.wait_for_url(url_glob)
        return await self.log_rows()

    async def assert_clean(self, name: str) -> None:
        await assert_clean(self.watched, name, self.screenshot_dir)

    async def both_schemes(self, name: str) -> None:
        await both_schemes(self.watched, name, self.screenshot_dir)
