"""The portal's pages over HTTP: the same rules as the API (another owner's id is a 404, the
level gates changes), the API's validation messages at the form's fields."""

from __future__ import annotations

import html
import json
import re

import httpx
from servicekit.signing import verify_webhook
from servicekit.testing import HttpReceiver
from sqlalchemy.ext.asyncio import AsyncEngine
from webhook_hub.settings import Settings

from tests.factories import (
    make_consumer,
    signed_in,
    signed_in_as_new,
    signed_in_with_endpoint,
    subscribe,
)


async def test_the_endpoint_list_shows_status_failures_and_disabled_reason(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer = await make_consumer(db_engine, "write")
    created = await subscribe(client, consumer.headers, http_receiver.url, description="Orders")
    await client.patch(
        f"/webhooks/subscriptions/{created['id']}",
        json={"is_active": False},
        headers=consumer.headers,
    )
    await signed_in(client, consumer)
    page = await client.get("/portal/endpoints")
    assert http_receiver.url in page.text
    assert "disabled" in page.text
    assert "disabled by its owner" in page.text
    assert 'data-label="Failed attempts in a row" class="num">0<' in page.text


async def test_creating_shows_the_apis_validation_errors_at_their_fields(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    _, token = await signed_in_as_new(client, db_engine)
    response = await client.post(
        "/portal/endpoints",
        data={
            "endpoint_url": "ftp://nowhere",
            "description": "",
            "csrf_token": token,
        },
    )
    assert response.status_code == 422
    errors = dict(
        re.findall(r'<p class="error-text" id="f-([a-z_]+)-error">([^<]+)</p>', response.text)
    )
    assert set(errors) == {"endpoint_url", "events"}


async def test_an_unknown_event_type_is_told_at_the_event_picker(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    _, token = await signed_in_as_new(client, db_engine)
    response = await client.post(
        "/portal/endpoints",
        data={"endpoint_url": http_receiver.url, "events": "order.piad", "csrf_token": token},
    )
    assert response.status_code == 422
    assert 'id="f-events-error">Unknown event types: order.piad' in response.text


async def test_creating_shows_the_secret_once_and_the_probe_result(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer, token = await signed_in_as_new(client, db_engine)
    response = await client.post(
        "/portal/endpoints",
        data={"endpoint_url": http_receiver.url, "events": "order.paid", "csrf_token": token},
    )
    assert response.status_code == 201
    assert "answered our check with HTTP 200" in response.text
    secret = re.search(r'id="secret" class="secret" readonly value="([^"]+)"', response.text)
    assert secret
    assert len(secret.group(1)) == 32
    listed = (await client.get("/webhooks/subscriptions", headers=consumer.headers)).json()
    assert [s["endpoint_url"] for s in listed["data"]] == [http_receiver.url]


async def test_another_owners_subscription_and_delivery_are_404_pages(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    owner_b = await make_consumer(db_engine, "write")
    theirs = await subscribe(client, owner_b.headers, http_receiver.url)
    their_delivery = (
        await client.get(
            f"/webhooks/subscriptions/{theirs['id']}/deliveries", headers=owner_b.headers
        )
    ).json()["data"][0]["id"]
    token = await signed_in(client, await make_consumer(db_engine, "admin"))
    for path in (f"/portal/endpoints/{theirs['id']}", f"/portal/deliveries/{their_delivery}"):
        response = await client.get(path)
        assert response.status_code == 404, path
        assert http_receiver.url not in response.text
    for action in ("test", "rotate-secret", "delete"):
        response = await client.post(
            f"/portal/endpoints/{theirs['id']}/{action}", data={"csrf_token": token}
        )
        assert response.status_code == 404, action
    retry = await client.post(
        f"/portal/deliveries/{their_delivery}/retry", data={"csrf_token": token}
    )
    assert retry.status_code == 404


async def test_a_read_session_sees_no_write_controls_and_cannot_post_changes(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    writer = await make_consumer(db_engine, "write")
    created = await subscribe(client, writer.headers, http_receiver.url)
    reader = await make_consumer(db_engine, "read", owner=writer.owner)
    token = await signed_in(client, reader)
    page = await client.get(f"/portal/endpoints/{created['id']}")
    assert page.status_code == 200
    assert "<button" not in page.text.split('id="log-heading"')[0].split("<main")[1]
    for action in ("test", "rotate-secret", "delete"):
        response = await client.post(
            f"/portal/endpoints/{created['id']}/{action}", data={"csrf_token": token}
        )
        assert response.status_code == 403, action
    assert (await client.get("/portal/endpoints/new")).status_code == 403


async def test_a_write_session_cannot_delete_as_the_api_needs_admin(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer = await make_consumer(db_engine, "write")
    created = await subscribe(client, consumer.headers, http_receiver.url)
    token = await signed_in(client, consumer)
    page = await client.get(f"/portal/endpoints/{created['id']}")
    assert "Delete endpoint" not in page.text
    response = await client.post(
        f"/portal/endpoints/{created['id']}/delete", data={"csrf_token": token}
    )
    assert response.status_code == 403


async def test_the_delivery_log_filters_by_status_and_event_type(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer = await make_consumer(db_engine, "write")
    created = await subscribe(client, consumer.headers, http_receiver.url)
    await signed_in(client, consumer)
    base = f"/portal/endpoints/{created['id']}"
    assert "webhook.test" in (await client.get(f"{base}?event_type=webhook.test")).text
    assert "No deliveries match" in (await client.get(f"{base}?event_type=order.paid")).text
    assert "No deliveries match" in (await client.get(f"{base}?status=failed")).text


async def test_the_event_catalog_shows_schema_and_pretty_example(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    await signed_in(client, await make_consumer(db_engine, "read"))
    page = await client.get("/portal/event-types")
    assert page.status_code == 200
    assert 'id="type-order.paid"' in page.text
    assert "{\n  &#34;id&#34;: 1\n}" in page.text
    assert "legacy.retired" not in page.text  # inactive types are not offered


async def test_disabling_through_the_portal_holds_the_endpoint_until_re_enabled(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer = await make_consumer(db_engine, "write")
    created = await subscribe(client, consumer.headers, http_receiver.url)
    token = await signed_in(client, consumer)
    api_path = f"/webhooks/subscriptions/{created['id']}"
    disabled = await client.post(
        f"/portal/endpoints/{created['id']}/status", data={"active": "false", "csrf_token": token}
    )
    assert disabled.status_code == 303
    page = await client.get(disabled.headers["location"])
    assert "Endpoint disabled." in page.text
    assert "disabled by its owner" in page.text
    assert '<input type="hidden" name="active" value="true">' in page.text  # Re-enable offered
    api = (await client.get(api_path, headers=consumer.headers)).json()
    assert (api["is_active"], api["disabled_reason"]) == (False, "disabled by its owner")

    enabled = await client.post(
        f"/portal/endpoints/{created['id']}/status", data={"active": "true", "csrf_token": token}
    )
    page = await client.get(enabled.headers["location"])
    assert "Endpoint re-enabled." in page.text
    assert '<input type="hidden" name="active" value="false">' in page.text  # Disable again
    api = (await client.get(api_path, headers=consumer.headers)).json()
    assert (api["is_active"], api["disabled_reason"]) == (True, None)


async def test_an_admin_session_deletes_an_endpoint_and_the_api_no_longer_knows_it(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    admin = await make_consumer(db_engine, "admin")
    doomed = await subscribe(client, admin.headers, http_receiver.url, description="doomed")
    kept = await subscribe(client, admin.headers, f"{http_receiver.url}/kept")
    token = await signed_in(client, admin)
    page = await client.get(f"/portal/endpoints/{doomed['id']}")
    assert "Delete endpoint" in page.text
    response = await client.post(
        f"/portal/endpoints/{doomed['id']}/delete", data={"csrf_token": token}
    )
    assert response.status_code == 303
    assert response.headers["location"] == "/portal/endpoints"
    listed = await client.get("/portal/endpoints")
    assert "Endpoint deleted, with its delivery log." in listed.text
    assert f"/portal/endpoints/{doomed['id']}" not in listed.text
    assert f"/portal/endpoints/{kept['id']}" in listed.text
    gone = await client.get(f"/webhooks/subscriptions/{doomed['id']}", headers=admin.headers)
    assert gone.status_code == 404
    assert (await client.get(f"/portal/endpoints/{doomed['id']}")).status_code == 404


async def test_send_test_event_from_the_portal_reaches_the_receiver_signed(
    worker: Settings,
    client: httpx.AsyncClient,
    db_engine: AsyncEngine,
    http_receiver: HttpReceiver,
) -> None:
    consumer = await make_consumer(db_engine, "write")
    created = await subscribe(client, consumer.headers, http_receiver.url)
    before = await http_receiver.wait_for(2)  # the probe, then the creation's test event
    token = await signed_in(client, consumer)
    response = await client.post(
        f"/portal/endpoints/{created['id']}/test", data={"csrf_token": token}
    )
    assert response.status_code == 303
    page = await client.get(response.headers["location"])
    assert "A webhook.test event is on its way" in page.text
    received = (await http_receiver.wait_for(len(before) + 1))[len(before)]
    assert received.method == "POST"
    verify_webhook(received.headers, received.body, [created["secret"]])
    assert received.headers["webhook-id"] not in {r.headers.get("webhook-id") for r in before}
    event = json.loads(received.body)
    assert event["type"] == "webhook.test"
    assert event["data"]["subscription_id"] == created["id"]


async def test_the_catalogs_subscribe_shortcut_opens_the_form_with_that_type_picked(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    await signed_in(client, await make_consumer(db_engine, "write"))
    catalog = await client.get("/portal/event-types")
    shortcut = re.search(
        r'<a href="([^"]+)">Subscribe an endpoint to <code>run.failed<', catalog.text
    )
    assert shortcut
    form = await client.get(html.unescape(shortcut.group(1)))
    assert form.status_code == 200
    picked = re.findall(r'name="events" value="([^"]+)" checked', form.text)
    assert picked == ["run.failed"]


def _ordering_summary(page_html: str) -> str:
    """The endpoint page's ordering summary as a reader sees it (tags out, spaces joined)."""
    found = re.search(r'<p id="ordering-summary">(.*?)</p>', page_html, re.S)
    assert found is not None
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", found.group(1))).split())


async def test_the_ordering_summary_promises_holding_only_when_events_are_ordered(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    _, unordered, _ = await signed_in_with_endpoint(client, db_engine, http_receiver.url)
    summary = _ordering_summary((await client.get(f"/portal/endpoints/{unordered['id']}")).text)
    assert summary == "Not ordered: events are delivered in parallel, as they come."

    _, ordered, _ = await signed_in_with_endpoint(
        client, db_engine, http_receiver.url, ordering={"key": None}
    )
    summary = _ordering_summary((await client.get(f"/portal/endpoints/{ordered['id']}")).text)
    assert summary == (
        "All events are delivered one at a time, in the order they were published. "
        "A failing event holds the ones behind it (of its key) until it succeeds or gives up."
    )
