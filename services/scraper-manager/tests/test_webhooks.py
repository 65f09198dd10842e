"""Run webhooks against a real webhook-hub (its worker process, over NATS): registration makes
a subscription owned by the client in the hub, deletion removes it, and no failure part way
leaves a subscription in the hub that scraper-manager does not know of."""

from __future__ import annotations

import html
import json
import re
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import nats
import pytest
from nats.aio.client import Client as NatsClient
from scraper_manager.app import create_app
from scraper_manager.models import ScraperWebhook, WebhookStatus
from scraper_manager.settings import Settings
from scraper_manager.webhooks.service import SOURCE, WebhookService, portal_level
from servicekit.auth.api_keys import AccessLevel
from servicekit.contracts.webhook_hub import HubSubscriptions, HubUnavailable
from servicekit.db.engine import create_session_factory, to_sqlalchemy_url
from servicekit.embedded.nats import EmbeddedNats
from servicekit.runtime import NatsConnection
from servicekit.signing import verify_webhook
from servicekit.testing import HttpReceiver, serve_app
from servicekit.web.pages.links import hash_token
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import NullPool
from sqlmodel import select

from tests.catalog import Catalog
from tests.dashboard import DASH, sign_in, signed_in_as_new
from tests.factories import Client, make_client
from tests.hub import eventually_true, webhook_hub_worker
from tests.test_changes import two_runs

EVENTS = ["run.completed", "run.failed"]


@dataclass
class Link:
    client: NatsClient


@pytest.fixture(scope="module")
def hub_database(postgres_server_url: str, nats_url: str) -> Iterator[str]:
    with webhook_hub_worker(postgres_server_url, nats_url) as database_url:
        yield database_url


@pytest.fixture
async def hub(
    hub_database: str, nats_url: str, client: httpx.AsyncClient
) -> AsyncIterator[HubSubscriptions]:
    """The hub as scraper-manager asks it, once it knows scraper-manager's event types
    (published by the app under test when it connects; the hub syncs them every 5 s)."""
    engine = create_async_engine(to_sqlalchemy_url(hub_database), poolclass=NullPool)

    async def knows_run_events() -> bool:
        async with engine.connect() as connection:
            found = await connection.scalar(
                text("SELECT count(*) FROM event_types WHERE name = 'run.completed'")
            )
        return bool(found)

    async def app_connected() -> bool:
        return (await client.get("/readyz")).status_code == 200

    connection = await nats.connect(nats_url)
    try:
        await eventually_true(knows_run_events, 30, "webhook-hub learning the run event types")
        # The hub's database may know the types from an earlier test's app: this test's app
        # must have its own NATS connection before it asks the hub anything.
        await eventually_true(app_connected, 30, "the app under test reaching NATS")
        yield HubSubscriptions(Link(connection), source=SOURCE, timeout=5)
    finally:
        await connection.close()
        await engine.dispose()


async def register(
    client: httpx.AsyncClient, who: Client, url: str, events: list[str] = EVENTS, **fields: Any
) -> httpx.Response:
    """`POST /api/v1/webhooks` as `who`, with `fields` beside the URL and events."""
    return await client.post(
        "/api/v1/webhooks", json={"url": url, "events": events, **fields}, headers=who.headers
    )


async def local_rows(engine: AsyncEngine, owner: str) -> list[ScraperWebhook]:
    async with create_session_factory(engine)() as session:
        statement = select(ScraperWebhook).where(ScraperWebhook.owner == owner)
        return list((await session.exec(statement)).all())


async def test_registration_subscribes_the_url_in_webhook_hub_for_the_client_only(
    client: httpx.AsyncClient,
    db_engine: AsyncEngine,
    hub: HubSubscriptions,
    http_receiver: HttpReceiver,
) -> None:
    who = await make_client(db_engine, "write")
    response = await register(client, who, http_receiver.url)
    assert response.status_code == 201, response.text
    body = response.json()
    assert set(body) == {"id", "url", "events", "secret", "created_at"}
    assert len(body["secret"]) == 32
    [subscription] = await hub.list(who.owner)
    assert str(subscription.id) == body["id"]
    assert subscription.events == EVENTS
    assert subscription.endpoint_url == http_receiver.url
    assert await hub.list(f"someone-else-{uuid.uuid4().hex[:6]}") == []
    listed = (await client.get("/api/v1/webhooks", headers=who.headers)).json()
    assert [w["id"] for w in listed] == [body["id"]]
    assert "secret" not in listed[0]


async def test_a_rate_limit_given_at_registration_is_the_hub_subscriptions(
    client: httpx.AsyncClient,
    db_engine: AsyncEngine,
    hub: HubSubscriptions,
    http_receiver: HttpReceiver,
) -> None:
    who = await make_client(db_engine, "write")
    response = await register(
        client, who, http_receiver.url, rate_limit_per_second=5, rate_limit_burst=2
    )
    assert response.status_code == 201, response.text
    [subscription] = await hub.list(who.owner)
    assert (subscription.rate_limit_per_second, subscription.rate_limit_burst) == (5, 2)


async def test_a_bad_rate_limit_is_422_naming_it_and_nothing_is_registered(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "write")
    response = await register(client, who, "https://client.example/hooks", rate_limit_per_second=0)
    assert response.status_code == 422
    assert "rate_limit_per_second" in response.text
    assert await local_rows(db_engine, who.owner) == []


async def test_unknown_event_names_are_422_and_nothing_is_registered(
    client: httpx.AsyncClient, db_engine: AsyncEngine, hub: HubSubscriptions
) -> None:
    who = await make_client(db_engine, "write")
    response = await register(client, who, "https://client.example/hooks", ["order.paid"])
    assert response.status_code == 422
    assert response.json()["code"] == "unknown_event_types"
    assert response.json()["invalid_events"] == ["order.paid"]
    assert await hub.list(who.owner) == []
    assert await local_rows(db_engine, who.owner) == []


async def test_a_webhook_the_hub_refuses_is_422_and_leaves_no_record(
    client: httpx.AsyncClient, db_engine: AsyncEngine, hub: HubSubscriptions
) -> None:
    who = await make_client(db_engine, "write")
    # Credentials in the URL: webhook-hub refuses them (headers carry secrets there).
    response = await register(client, who, "https://user:pw@client.example/hooks")
    assert response.status_code == 422, response.text
    assert response.json()["error"]
    assert await hub.list(who.owner) == []
    assert await local_rows(db_engine, who.owner) == []


async def test_a_retry_schedule_and_timeout_are_passed_to_the_hubs_subscription(
    client: httpx.AsyncClient, db_engine: AsyncEngine, hub: HubSubscriptions
) -> None:
    who = await make_client(db_engine, "write")
    response = await register(
        client,
        who,
        "https://client.example/hooks",
        retry_schedule=["30s", "5m", "1h"],
        timeout_seconds=5,
    )
    assert response.status_code == 201, response.text
    [subscription] = await hub.list(who.owner)
    assert (subscription.retry_schedule, subscription.timeout_seconds) == (["30s", "5m", "1h"], 5)


async def test_a_webhook_without_them_keeps_the_hubs_defaults(
    client: httpx.AsyncClient, db_engine: AsyncEngine, hub: HubSubscriptions
) -> None:
    who = await make_client(db_engine, "write")
    response = await register(client, who, "https://client.example/hooks")
    assert response.status_code == 201, response.text
    [subscription] = await hub.list(who.owner)
    assert (subscription.retry_schedule, subscription.timeout_seconds) == (None, 10)


async def test_a_bad_wait_is_the_hubs_422_naming_the_entry_and_nothing_is_registered(
    client: httpx.AsyncClient, db_engine: AsyncEngine, hub: HubSubscriptions
) -> None:
    who = await make_client(db_engine, "write")
    response = await register(
        client, who, "https://client.example/hooks", retry_schedule=["5s", "soon"]
    )
    assert response.status_code == 422, response.text
    assert "retry_schedule.1" in response.json()["error"]
    assert await hub.list(who.owner) == []
    assert await local_rows(db_engine, who.owner) == []


async def test_a_filter_and_transform_are_passed_to_the_hub_and_one_it_refuses_says_where(
    client: httpx.AsyncClient,
    db_engine: AsyncEngine,
    hub: HubSubscriptions,
    http_receiver: HttpReceiver,
) -> None:
    who = await make_client(db_engine, "write")
    refused = await register(client, who, http_receiver.url, filter="event.data.status ==")
    assert refused.status_code == 422, refused.text
    # The hub's position, passed through beside scraper-manager's own code.
    assert (refused.json()["field"], refused.json()["line"]) == ("filter", 1)
    assert refused.json()["column"] >= 1
    assert await hub.list(who.owner) == []
    assert await local_rows(db_engine, who.owner) == []
    created = await register(
        client,
        who,
        http_receiver.url,
        filter='event.data.status == "failed"',
        transform='{"run": event.data.run_id}',
    )
    assert created.status_code == 201, created.text
    [subscription] = await hub.list(who.owner)
    assert subscription.filter == 'event.data.status == "failed"'
    assert subscription.transform == '{"run": event.data.run_id}'


async def test_an_ordering_is_passed_to_the_hub_and_a_key_it_refuses_is_422_naming_it(
    client: httpx.AsyncClient,
    db_engine: AsyncEngine,
    hub: HubSubscriptions,
    http_receiver: HttpReceiver,
) -> None:
    who = await make_client(db_engine, "write")
    ordered = {"url": http_receiver.url, "events": EVENTS, "ordering": {"key": "event.tenant"}}
    response = await client.post("/api/v1/webhooks", json=ordered, headers=who.headers)
    assert response.status_code == 201, response.text
    [subscription] = await hub.list(who.owner)
    assert subscription.ordering is not None
    assert subscription.ordering.key == "event.tenant"

    refused = {**ordered, "ordering": {"key": "event.tenant +"}}
    response = await client.post("/api/v1/webhooks", json=refused, headers=who.headers)
    assert response.status_code == 422, response.text
    assert response.json()["field"] == "ordering.key"
    assert len(await hub.list(who.owner)) == 1


async def test_deleting_a_webhook_removes_the_subscription_and_another_clients_is_404(
    client: httpx.AsyncClient,
    db_engine: AsyncEngine,
    hub: HubSubscriptions,
    http_receiver: HttpReceiver,
) -> None:
    owner = await make_client(db_engine, "admin")
    stranger = await make_client(db_engine, "admin")
    registered = await register(client, owner, http_receiver.url)
    assert registered.status_code == 201, registered.text
    path = f"/api/v1/webhooks/{registered.json()['id']}"
    assert (await client.delete(path, headers=stranger.headers)).status_code == 404
    assert (await client.delete(path, headers=owner.headers)).status_code == 204
    assert await hub.list(owner.owner) == []
    assert (await client.get("/api/v1/webhooks", headers=owner.headers)).json() == []
    assert (await client.delete(path, headers=owner.headers)).status_code == 404


async def test_a_failure_after_the_hub_subscribed_leaves_no_orphan_and_says_so(
    client: httpx.AsyncClient,
    db_engine: AsyncEngine,
    hub: HubSubscriptions,
    http_receiver: HttpReceiver,
) -> None:
    """A real failure between the two writes: a trigger makes the local write that records
    the hub's subscription fail (only the first, `pending` record may be written)."""
    who = await make_client(db_engine, "write")
    trigger = f"fail_{uuid.uuid4().hex[:8]}"
    async with db_engine.begin() as connection:
        await connection.execute(
            text(
                f"""
                CREATE FUNCTION {trigger}() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN
                  IF to_jsonb(NEW)->>'status' IS DISTINCT FROM 'pending' THEN
                    RAISE EXCEPTION 'disk full (the test says)';
                  END IF;
                  RETURN NEW;
                END $$
                """
            )
        )
        await connection.execute(
            text(
                f"CREATE TRIGGER {trigger} BEFORE INSERT OR UPDATE ON scraper_webhooks "
                f"FOR EACH ROW WHEN (NEW.owner = '{who.owner}') EXECUTE FUNCTION {trigger}()"
            )
        )
    try:
        response = await register(client, who, http_receiver.url)
    finally:
        async with db_engine.begin() as connection:
            await connection.execute(text(f"DROP TRIGGER {trigger} ON scraper_webhooks"))
            await connection.execute(text(f"DROP FUNCTION {trigger}()"))
    assert response.status_code == 503, response.text
    assert response.json()["code"] == "registration_failed"
    assert "nothing was registered" in response.json()["error"]
    assert await hub.list(who.owner) == []
    assert await local_rows(db_engine, who.owner) == []


async def add_pending(engine: AsyncEngine, owner: str, age: timedelta) -> None:
    async with create_session_factory(engine)() as session, session.begin():
        session.add(
            ScraperWebhook(
                id=str(uuid.uuid4()),
                owner=owner,
                url="http://127.0.0.1:9/hooks",
                events=EVENTS,
                created_at=datetime.now(UTC) - age,
            )
        )


async def test_the_reconciler_deletes_the_subscription_of_an_interrupted_registration(
    client: httpx.AsyncClient,
    db_engine: AsyncEngine,
    hub: HubSubscriptions,
    http_receiver: HttpReceiver,
    service_settings: Settings,
) -> None:
    """A process that died between the hub's answer and its own write left a pending row and
    a subscription nobody here knows; the client's registered webhook stays."""
    who = await make_client(db_engine, "write")
    kept = (await register(client, who, http_receiver.url)).json()
    await add_pending(db_engine, who.owner, age=timedelta(minutes=5))
    orphan = await hub.create(who.owner, http_receiver.url, ["run.failed"])
    service = WebhookService(create_session_factory(db_engine), hub)

    assert (
        await service.reconcile(timedelta(seconds=service_settings.webhook_pending_grace_seconds))
        == 1
    )

    assert [str(s.id) for s in await hub.list(who.owner)] == [kept["id"]]
    assert str(orphan.id) != kept["id"]
    rows = await local_rows(db_engine, who.owner)
    assert [(r.subscription_id, r.status) for r in rows] == [(kept["id"], WebhookStatus.ACTIVE)]


async def test_the_reconciler_leaves_a_registration_in_progress_alone(
    db_engine: AsyncEngine, hub: HubSubscriptions, http_receiver: HttpReceiver
) -> None:
    who = await make_client(db_engine, "write")
    await add_pending(db_engine, who.owner, age=timedelta(minutes=5))
    await add_pending(db_engine, who.owner, age=timedelta(seconds=1))
    in_progress = await hub.create(who.owner, http_receiver.url, ["run.failed"])
    service = WebhookService(create_session_factory(db_engine), hub)

    assert await service.reconcile(timedelta(seconds=60)) == 0

    assert [s.id for s in await hub.list(who.owner)] == [in_progress.id]
    assert len(await local_rows(db_engine, who.owner)) == 2


async def test_without_webhook_hub_registration_is_503_and_nothing_is_listed(
    db_engine: AsyncEngine, service_settings: Settings, restartable_nats: EmbeddedNats
) -> None:
    """On a NATS where no webhook-hub answers."""
    who = await make_client(db_engine, "write")
    settings = service_settings.model_copy(update={"nats_url": restartable_nats.url})
    async with serve_app(create_app(settings)) as client:
        response = await register(client, who, "https://client.example/hooks")
        listed = (await client.get("/api/v1/webhooks", headers=who.headers)).json()
    assert response.status_code == 503
    assert response.json()["code"] == "unavailable"
    assert listed == []


# -- run.items_changed delivered (the worker's outbox, over NATS, through the hub) -----------


@pytest.fixture
async def shop() -> AsyncIterator[Catalog]:
    site = Catalog(pages={0: {"A": "1.00", "B": "2.00"}, 1: {"C": "3.00"}})
    await site.start()
    yield site
    await site.stop()


def delivered(receiver: HttpReceiver, event_type: str) -> list[dict[str, Any]]:
    """The Standard Webhooks payloads of `event_type` the receiver has been sent so far."""
    payloads = [json.loads(request.body) for request in receiver.requests]
    return [payload for payload in payloads if payload.get("type") == event_type]


async def test_a_runs_changes_reach_the_subscriber_through_the_hub_as_run_items_changed(
    worker: Settings,
    client: httpx.AsyncClient,
    db_engine: AsyncEngine,
    hub: HubSubscriptions,
    http_receiver: HttpReceiver,
    shop: Catalog,
) -> None:
    """Two runs of a scraper keyed by `sku`; between them A's price changes, B goes and D
    comes. The receiver subscribed in the hub is sent the counts and each change, signed."""
    who = await make_client(db_engine, "write")
    registered = await register(
        client, who, http_receiver.url, ["run.completed", "run.items_changed"]
    )
    assert registered.status_code == 201, registered.text
    _, first, second = await two_runs(client, who, shop)

    async def both_delivered() -> bool:
        return bool(delivered(http_receiver, "run.items_changed")) and (
            len(delivered(http_receiver, "run.completed")) == 2
        )

    await eventually_true(both_delivered, 60, "run.items_changed and run.completed delivered")
    [changed] = delivered(http_receiver, "run.items_changed")
    data = changed["data"]
    assert (data["run_id"], data["compared_run_id"]) == (second["id"], first["id"])
    assert (data["added"], data["removed"], data["changed"]) == (1, 1, 1)
    assert [(c["kind"], c["key"]) for c in data["changes"]] == [
        ("changed", "A"),
        ("removed", "B"),
        ("added", "D"),
    ]
    assert data["changes"][0]["fields"] == {"price": {"old": "1.00", "new": "1.50"}}
    assert data["changes"][1]["item"]["price"] == "2.00"
    assert data["changes"][2]["item"]["price"] == "4.00"
    assert data["more"] is False
    completed = {p["data"]["run_id"]: p["data"] for p in delivered(http_receiver, "run.completed")}
    assert completed[first["id"]]["changes"]["compared_run_id"] is None
    counts = completed[second["id"]]["changes"]
    assert (counts["added"], counts["removed"], counts["changed"]) == (1, 1, 1)
    [request] = [r for r in http_receiver.requests if b'"run.items_changed"' in r.body]
    verify_webhook(request.headers, request.body, [registered.json()["secret"]])


# -- the dashboard's webhooks page (the same service, the hub asked for the deliveries) --------


async def add_in_dashboard(
    client: httpx.AsyncClient, token: str, url: str, events: list[str]
) -> httpx.Response:
    """The dashboard's "Add webhook" form sent, signed in with the CSRF token `token`."""
    return await client.post(
        f"{DASH}/webhooks", data={"url": url, "events": events, "csrf_token": token}
    )


async def test_the_dashboard_lists_each_webhook_with_its_last_deliveries_from_the_hub(
    client: httpx.AsyncClient,
    db_engine: AsyncEngine,
    hub: HubSubscriptions,
    http_receiver: HttpReceiver,
) -> None:
    who = await make_client(db_engine, "read")
    writer = await make_client(db_engine, "write", owner=who.owner)
    registered = await register(client, writer, http_receiver.url)
    assert registered.status_code == 201, registered.text
    hook_id = uuid.UUID(registered.json()["id"])

    async def delivered() -> bool:
        return any(d.status == "succeeded" for d in await hub.deliveries(who.owner, hook_id))

    # The hub's own test event is the first delivery of every new subscription.
    await eventually_true(delivered, 30, "the test event delivered")
    await sign_in(client, who)
    page = await client.get(f"{DASH}/webhooks")
    assert page.status_code == 200
    assert http_receiver.url in page.text
    assert "run.completed, run.failed" in page.text
    table = page.text.split('class="data deliveries"')[1].split("</table>")[0]
    assert "succeeded" in table
    assert '<td data-label="Last status" class="num">200</td>' in table
    assert "Add webhook" not in page.text  # a read session: no write control
    assert "Remove" not in page.text


async def test_adding_a_webhook_in_the_dashboard_registers_it_and_shows_its_secret_once(
    client: httpx.AsyncClient,
    db_engine: AsyncEngine,
    hub: HubSubscriptions,
    http_receiver: HttpReceiver,
) -> None:
    who, token = await signed_in_as_new(client, db_engine, "write")
    added = await add_in_dashboard(
        client, token, http_receiver.url, ["run.completed", "run.stopped"]
    )
    assert added.status_code == 201, added.text
    [subscription] = await hub.list(who.owner)
    assert subscription.events == ["run.completed", "run.stopped"]
    assert 'id="secret"' in added.text
    assert 'id="secret"' not in (await client.get(f"{DASH}/webhooks")).text


async def test_the_secret_shown_once_and_each_webhooks_id_have_a_copy_button(
    client: httpx.AsyncClient,
    db_engine: AsyncEngine,
    hub: HubSubscriptions,
    http_receiver: HttpReceiver,
) -> None:
    who, token = await signed_in_as_new(client, db_engine, "write")
    added = await add_in_dashboard(client, token, http_receiver.url, ["run.completed"])
    assert added.status_code == 201, added.text
    # A real button (kit/pages.js copies its target and says so in the status region).
    assert '<button type="button" class="secondary" data-copy="secret">Copy secret</button>' in (
        added.text
    )
    [subscription] = await hub.list(who.owner)
    listed = (await client.get(f"{DASH}/webhooks")).text
    assert f'<code id="hook-id-1">{subscription.id}</code>' in listed
    assert 'data-copy="hook-id-1" aria-label="Copy the id of the webhook to' in listed


async def test_a_webhook_without_events_or_with_a_bad_url_is_refused_at_its_field(
    client: httpx.AsyncClient, db_engine: AsyncEngine, hub: HubSubscriptions
) -> None:
    who, token = await signed_in_as_new(client, db_engine, "write")
    no_events = await client.post(
        f"{DASH}/webhooks", data={"url": "https://client.example/hooks", "csrf_token": token}
    )
    assert no_events.status_code == 422
    assert 'id="f-events-error"' in no_events.text
    assert 'value="https://client.example/hooks"' in no_events.text  # what was typed stays
    # Credentials in the URL: the hub refuses them; its reason is shown at the URL.
    refused = await add_in_dashboard(
        client, token, "https://user:pw@client.example/hooks", ["run.failed"]
    )
    assert refused.status_code == 422
    assert 'id="f-url-error"' in refused.text
    assert await hub.list(who.owner) == []


async def test_removing_a_webhook_in_the_dashboard_deletes_it_and_another_owners_is_404(
    client: httpx.AsyncClient,
    db_engine: AsyncEngine,
    hub: HubSubscriptions,
    http_receiver: HttpReceiver,
) -> None:
    owner = await make_client(db_engine, "admin")
    stranger = await make_client(db_engine, "admin")
    registered = await register(client, owner, http_receiver.url)
    path = f"{DASH}/webhooks/{registered.json()['id']}/delete"
    token = await sign_in(client, stranger)
    assert (await client.post(path, data={"csrf_token": token})).status_code == 404
    token = await sign_in(client, owner)
    removed = await client.post(path, data={"csrf_token": token})
    assert removed.status_code == 303
    assert await hub.list(owner.owner) == []
    assert http_receiver.url not in (await client.get(f"{DASH}/webhooks")).text


# -- the delivery portal button (a one-time link asked of the hub on the click) ---------------


async def hub_link(hub_database: str, url: str) -> tuple[str, str]:
    """The owner and level of the hub's portal link behind `url`, read in the hub's table."""
    engine = create_async_engine(to_sqlalchemy_url(hub_database), poolclass=NullPool)
    try:
        async with engine.connect() as connection:
            row = (
                await connection.execute(
                    text("SELECT owner, level FROM portal_links WHERE token_hash = :h"),
                    {"h": hash_token(url.rsplit("/", 1)[1])},
                )
            ).one()
    finally:
        await engine.dispose()
    return str(row[0]), str(row[1])


def portal_url_in(page: str) -> str:
    found = re.search(r'<meta http-equiv="refresh" content="0; url=([^"]+)">', page)
    assert found, "the page does not move on to the portal"
    return html.unescape(found.group(1))


@pytest.mark.parametrize(("level", "portal"), [("read", "read"), ("admin", "write")])
async def test_the_portal_button_asks_the_hub_for_a_link_at_the_users_level_at_most_write(
    client: httpx.AsyncClient,
    db_engine: AsyncEngine,
    hub: HubSubscriptions,
    hub_database: str,
    http_receiver: HttpReceiver,
    level: str,
    portal: str,
) -> None:
    who = await make_client(db_engine, level)
    writer = await make_client(db_engine, "write", owner=who.owner)
    assert (await register(client, writer, http_receiver.url)).status_code == 201
    token = await sign_in(client, who)
    page = await client.get(f"{DASH}/webhooks")
    assert "Open the delivery portal" in page.text
    opened = await client.post(f"{DASH}/webhooks/portal", data={"csrf_token": token})
    assert opened.status_code == 200, opened.text
    assert opened.headers["cache-control"] == "no-store"
    url = portal_url_in(opened.text)
    assert "/portal/link/" in url
    assert await hub_link(hub_database, url) == (who.owner, portal)


async def test_the_portal_button_needs_the_pages_csrf_token(
    client: httpx.AsyncClient, db_engine: AsyncEngine, hub: HubSubscriptions
) -> None:
    who = await make_client(db_engine, "read")
    await sign_in(client, who)
    refused = await client.post(f"{DASH}/webhooks/portal", data={})
    assert refused.status_code == 403


async def test_without_webhooks_there_is_no_portal_button_and_a_post_says_to_add_one(
    client: httpx.AsyncClient, db_engine: AsyncEngine, hub: HubSubscriptions
) -> None:
    _, token = await signed_in_as_new(client, db_engine, "write")
    assert "Open the delivery portal" not in (await client.get(f"{DASH}/webhooks")).text
    answered = await client.post(f"{DASH}/webhooks/portal", data={"csrf_token": token})
    assert answered.status_code == 409
    assert "add a webhook first" in answered.text


async def test_when_the_hub_does_not_answer_the_portal_button_says_so_on_the_page(
    db_engine: AsyncEngine, service_settings: Settings, restartable_nats: EmbeddedNats
) -> None:
    """On a NATS where no webhook-hub answers: the webhooks page again, saying so."""
    who = await make_client(db_engine, "read")
    await add_active_row(db_engine, who.owner)
    async with serve_app(create_app(without_hub(service_settings, restartable_nats))) as http:
        token = await sign_in(http, who)
        answered = await http.post(f"{DASH}/webhooks/portal", data={"csrf_token": token})
    assert answered.status_code == 503
    assert 'role="alert" id="portal-error">webhook-hub did not answer; try again shortly' in (
        answered.text
    )
    assert "https://client.example/hooks" in answered.text


def without_hub(settings: Settings, restartable_nats: EmbeddedNats) -> Settings:
    """`settings` on a NATS where no webhook-hub answers, asking it for 1 s at most."""
    return settings.model_copy(
        update={"nats_url": restartable_nats.url, "hub_request_timeout_seconds": 1}
    )


def test_a_dashboard_users_level_opens_the_portal_at_read_or_write() -> None:
    assert portal_level(AccessLevel.READ) == "read"
    assert portal_level(AccessLevel.WRITE) == "write"
    assert portal_level(AccessLevel.ADMIN) == "write"


async def add_active_row(engine: AsyncEngine, owner: str) -> None:
    """A webhook as registration leaves it, whatever the hub holds (here: no hub at all)."""
    async with create_session_factory(engine)() as session, session.begin():
        session.add(
            ScraperWebhook(
                id=uuid.uuid4().hex,
                subscription_id=str(uuid.uuid4()),
                status=WebhookStatus.ACTIVE,
                owner=owner,
                url="https://client.example/hooks",
                events=["run.failed"],
            )
        )


async def test_when_the_hub_does_not_answer_the_webhooks_page_says_so_per_webhook(
    db_engine: AsyncEngine, service_settings: Settings, restartable_nats: EmbeddedNats
) -> None:
    """On a NATS where no webhook-hub answers: the page still lists what we know."""
    who = await make_client(db_engine, "read")
    await add_active_row(db_engine, who.owner)
    async with serve_app(create_app(without_hub(service_settings, restartable_nats))) as http:
        await sign_in(http, who)
        page = await http.get(f"{DASH}/webhooks")
    assert page.status_code == 200
    assert "https://client.example/hooks" in page.text
    assert "webhook-hub did not say how the last deliveries went" in page.text


async def test_asking_the_hub_before_nats_is_reached_is_the_hub_not_answering(
    service_settings: Settings,
) -> None:
    # A process whose NATS connection has not come up yet (a slow start): the overview tells
    # "unknown" for HubUnavailable, where a bare 503 had failed the whole page.
    not_connected = NatsConnection(service_settings, None)
    hub = HubSubscriptions(not_connected, source=SOURCE, timeout=1)
    with pytest.raises(HubUnavailable):
        await hub.list("acme")
