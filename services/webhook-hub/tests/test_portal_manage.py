"""The portal's second part over HTTP: editing an endpoint through the API's service and
checks, the 24 h success rate on the list, the delivery log's time range, "recover failed
since", the charts' figures and the receiver snippets (the Python one run for real)."""

from __future__ import annotations

import html
import re
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from servicekit.testing import HttpReceiver
from sqlalchemy import event, text
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlmodel.ext.asyncio.session import AsyncSession
from standardwebhooks.webhooks import WebhookVerificationError
from webhook_hub.portal.stats import PortalStatsService
from webhook_hub.settings import Settings
from webhook_hub.subscriptions.schemas import SubscriptionRead

from tests.factories import (
    Consumer,
    chart_of,
    make_consumer,
    only_test_delivery_settled,
    set_deliveries,
    signed_in,
    signed_in_as_new,
    subscribe,
    subscription_body,
)


def field_errors(page: str) -> dict[str, str]:
    return dict(re.findall(r'<p class="error-text" id="f-([a-z_]+)-error">([^<]+)</p>', page))


async def endpoint_and_session(
    client: httpx.AsyncClient, engine: AsyncEngine, url: str
) -> tuple[Consumer, dict[str, Any], str]:
    """A write consumer with an endpoint at `url`, signed in: the consumer, the API's 201
    body and the session's CSRF token."""
    consumer = await make_consumer(engine, "write")
    created = await subscribe(client, consumer.headers, url)
    return consumer, created, await signed_in(client, consumer)


def edit_form(token: str, url: str, **fields: Any) -> dict[str, Any]:
    return {
        "endpoint_url": url,
        "events": ["order.paid"],
        "description": "",
        "header_name": ["", ""],
        "header_value": ["", ""],
        "send_trace_context": "on",
        "csrf_token": token,
        **fields,
    }


# -- edit ------------------------------------------------------------------------------------


async def test_the_edit_form_is_filled_with_the_endpoints_settings(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer = await make_consumer(db_engine, "write")
    response = await client.post(
        "/webhooks/subscriptions",
        json=subscription_body(
            http_receiver.url, headers={"X-Team": "warehouse"}, timeout_seconds=7
        ),
        headers=consumer.headers,
    )
    created = response.json()
    await signed_in(client, consumer)
    page = await client.get(f"/portal/endpoints/{created['id']}/edit")
    assert page.status_code == 200
    assert f'value="{http_receiver.url}"' in page.text
    assert 'value="order.paid" checked' in page.text
    assert 'name="header_name" value="X-Team"' in page.text
    assert 'name="header_value" value="warehouse"' in page.text


async def test_editing_saves_url_events_description_and_headers(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer, created, token = await endpoint_and_session(client, db_engine, http_receiver.url)
    new_url = f"{http_receiver.url}/v2"
    response = await client.post(
        f"/portal/endpoints/{created['id']}/edit",
        data=edit_form(
            token,
            new_url,
            events=["order.paid", "order.created"],
            description="Orders, v2",
            header_name=["X-Team", ""],
            header_value=["warehouse", ""],
        ),
    )
    assert response.status_code == 303
    saved = SubscriptionRead.model_validate(
        (
            await client.get(f"/webhooks/subscriptions/{created['id']}", headers=consumer.headers)
        ).json()
    )
    assert saved.endpoint_url == new_url
    assert saved.events == ["order.paid", "order.created"]
    assert saved.description == "Orders, v2"
    assert saved.headers == {"X-Team": "warehouse"}


async def test_the_edit_form_offers_trace_context_ticked_by_default(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    _, created, _ = await endpoint_and_session(client, db_engine, http_receiver.url)
    page = await client.get(f"/portal/endpoints/{created['id']}/edit")
    assert 'name="send_trace_context" value="on" checked' in page.text


async def test_unticking_trace_context_stops_sending_it_and_the_endpoint_page_says_so(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer, created, token = await endpoint_and_session(client, db_engine, http_receiver.url)
    form = edit_form(token, http_receiver.url)
    del form["send_trace_context"]  # an unticked checkbox is not posted
    response = await client.post(f"/portal/endpoints/{created['id']}/edit", data=form)
    assert response.status_code == 303
    saved = await client.get(f"/webhooks/subscriptions/{created['id']}", headers=consumer.headers)
    assert saved.json()["send_trace_context"] is False
    page = await client.get(f"/portal/endpoints/{created['id']}")
    assert "<dt>Trace context</dt><dd>not sent</dd>" in page.text
    edit = await client.get(f"/portal/endpoints/{created['id']}/edit")
    assert 'name="send_trace_context" value="on">' in edit.text


async def test_editing_shows_the_apis_validation_errors_at_their_fields(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer, created, token = await endpoint_and_session(client, db_engine, http_receiver.url)
    response = await client.post(
        f"/portal/endpoints/{created['id']}/edit",
        data=edit_form(token, "ftp://nowhere", events=[]),
    )
    assert response.status_code == 422
    errors = field_errors(response.text)
    assert set(errors) == {"endpoint_url", "events"}
    assert errors["events"] == "Pick at least one event type."
    assert 'value="ftp://nowhere"' in response.text  # the form comes back as it was sent
    unchanged = await client.get(
        f"/webhooks/subscriptions/{created['id']}", headers=consumer.headers
    )
    assert unchanged.json()["endpoint_url"] == http_receiver.url


async def test_a_reserved_header_is_refused_at_the_headers_field(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    _consumer, created, token = await endpoint_and_session(client, db_engine, http_receiver.url)
    response = await client.post(
        f"/portal/endpoints/{created['id']}/edit",
        data=edit_form(token, http_receiver.url, header_name=["webhook-id"], header_value=["x"]),
    )
    assert response.status_code == 422
    assert "set by webhook-hub" in field_errors(response.text)["headers"]


async def test_a_header_value_without_a_name_is_refused(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    _, token = await signed_in_as_new(client, db_engine)
    response = await client.post(
        "/portal/endpoints",
        data=edit_form(token, http_receiver.url, header_name=[""], header_value=["orphan"]),
    )
    assert response.status_code == 422
    assert field_errors(response.text)["headers"] == "Every header needs a name"


async def test_creating_without_an_event_type_asks_to_pick_one(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    token = await signed_in(client, await make_consumer(db_engine, "write"))
    response = await client.post(
        "/portal/endpoints", data=edit_form(token, http_receiver.url, events=[])
    )
    assert response.status_code == 422
    assert field_errors(response.text)["events"] == "Pick at least one event type."
    assert "at least 1 item" not in response.text


async def test_creating_keeps_custom_headers(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer, token = await signed_in_as_new(client, db_engine)
    response = await client.post(
        "/portal/endpoints",
        data=edit_form(
            token,
            http_receiver.url,
            header_name=["X-Team"],
            header_value=["ops"],
        ),
    )
    assert response.status_code == 201
    listed = (await client.get("/webhooks/subscriptions", headers=consumer.headers)).json()
    assert [s["headers"] for s in listed["data"]] == [{"X-Team": "ops"}]


async def test_another_owners_edit_and_recover_are_404(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    owner_b = await make_consumer(db_engine, "write")
    theirs = await subscribe(client, owner_b.headers, http_receiver.url)
    token = await signed_in(client, await make_consumer(db_engine, "write"))
    assert (await client.get(f"/portal/endpoints/{theirs['id']}/edit")).status_code == 404
    edit = await client.post(
        f"/portal/endpoints/{theirs['id']}/edit", data=edit_form(token, "https://evil.example")
    )
    assert edit.status_code == 404
    recover = await client.post(
        f"/portal/endpoints/{theirs['id']}/recover",
        data={"since": "2026-01-01T00:00", "csrf_token": token},
    )
    assert recover.status_code == 404
    still = await client.get(f"/webhooks/subscriptions/{theirs['id']}", headers=owner_b.headers)
    assert still.json()["endpoint_url"] == http_receiver.url


async def test_a_read_session_cannot_edit_or_recover(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    writer = await make_consumer(db_engine, "write")
    created = await subscribe(client, writer.headers, http_receiver.url)
    token = await signed_in(client, await make_consumer(db_engine, "read", owner=writer.owner))
    assert (await client.get(f"/portal/endpoints/{created['id']}/edit")).status_code == 403
    page = await client.get(f"/portal/endpoints/{created['id']}")
    assert "Edit endpoint" not in page.text
    assert "Recover failed deliveries" not in page.text
    recover = await client.post(
        f"/portal/endpoints/{created['id']}/recover",
        data={"since": "2026-01-01T00:00", "csrf_token": token},
    )
    assert recover.status_code == 403


# -- success rate, time range, recover ------------------------------------------------------


async def test_the_endpoint_list_shows_each_endpoints_24h_counts_beside_their_rate(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer = await make_consumer(db_engine, "write")
    busy = await subscribe(client, consumer.headers, http_receiver.url, description="busy")
    quiet = await subscribe(client, consumer.headers, f"{http_receiver.url}/q")
    for created in (busy, quiet):
        await only_test_delivery_settled(db_engine, created["id"])
    hour = timedelta(hours=1)
    await set_deliveries(
        db_engine,
        busy["id"],
        [("succeeded", hour)] * 3
        + [("failed", hour), ("pending", hour), ("failed", 3 * 24 * hour)],
    )
    await signed_in(client, consumer)
    page = await client.get("/portal/endpoints")
    rates = re.findall(r'data-label="Last 24 h">([^<]*)</td>', page.text)
    by_row = dict(
        zip(re.findall(r'<a href="/portal/endpoints/([0-9a-f-]+)">', page.text), rates, strict=True)
    )
    # 3 of the 4 finished in 24 h; the pending one is named beside the rate, not left out.
    assert by_row[busy["id"]] == "3 delivered, 1 failed, 1 pending (75 % of finished)"
    assert by_row[quiet["id"]] == "no deliveries"


async def test_success_rates_of_a_whole_page_take_one_query(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer = await make_consumer(db_engine, "write")
    ids = [
        uuid.UUID((await subscribe(client, consumer.headers, f"{http_receiver.url}/{n}"))["id"])
        for n in range(3)
    ]
    statements: list[str] = []

    def count(*args: Any) -> None:
        statements.append(str(args[2]))

    event.listen(db_engine.sync_engine, "before_cursor_execute", count)
    try:
        async with db_engine.connect() as connection, AsyncSession(bind=connection) as session:
            rates = await PortalStatsService(session).success_rates(ids)
    finally:
        event.remove(db_engine.sync_engine, "before_cursor_execute", count)
    assert set(rates) == set(ids)
    assert len([s for s in statements if "FROM deliveries" in s]) == 1


async def test_the_delivery_log_filters_by_time_range(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer = await make_consumer(db_engine, "write")
    created = await subscribe(client, consumer.headers, http_receiver.url)
    await only_test_delivery_settled(db_engine, created["id"])  # 30 days old
    await set_deliveries(db_engine, created["id"], [("failed", timedelta(hours=2))])
    await signed_in(client, consumer)
    base = f"/portal/endpoints/{created['id']}"
    now = datetime.now(UTC)
    since_yesterday = (now - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M")
    recent = await client.get(base, params={"from": since_yesterday})
    assert recent.text.count('data-label="Status"><span class="badge badge-bad">failed') == 1
    assert "webhook.test" not in recent.text.split('id="deliveries"')[1].split("</tbody>")[0]
    old = await client.get(
        base, params={"to": (now - timedelta(days=20)).strftime("%Y-%m-%dT%H:%M")}
    )
    rows = old.text.split('id="deliveries"')[1].split("</tbody>")[0]
    assert "webhook.test" in rows
    assert "badge-bad" not in rows
    assert f'value="{since_yesterday}"' in recent.text  # the filter stays in its input


async def test_a_time_range_that_is_not_a_date_is_told_at_its_input(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer = await make_consumer(db_engine, "write")
    created = await subscribe(client, consumer.headers, http_receiver.url)
    await signed_in(client, consumer)
    page = await client.get(
        f"/portal/endpoints/{created['id']}",
        params={"from": "yesterday", "to": ""},
    )
    assert page.status_code == 200
    assert "Use a date and time" in field_errors(page.text)["from"]


async def test_next_page_walks_the_whole_delivery_log_without_duplicates_or_gaps(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer = await make_consumer(db_engine, "write")
    created = await subscribe(client, consumer.headers, http_receiver.url)
    # More than two pages of 20; rows written in one transaction share `created_at` (now()),
    # so the cursor's tie-break on the id is walked too.
    await set_deliveries(
        db_engine,
        created["id"],
        [("succeeded", timedelta(minutes=5))] * 25 + [("failed", timedelta(hours=1))] * 20,
    )
    async with db_engine.connect() as connection:
        stored = set(
            (
                await connection.execute(
                    text("SELECT id::text FROM deliveries WHERE subscription_id = :sid"),
                    {"sid": created["id"]},
                )
            ).scalars()
        )
    await signed_in(client, consumer)
    seen: list[str] = []
    pages = 0
    url: str | None = f"/portal/endpoints/{created['id']}"
    while url is not None:
        page = (await client.get(url)).text
        pages += 1
        rows = page.split('id="deliveries"')[1].split("</tbody>")[0]
        seen += re.findall(r'<a href="/portal/deliveries/([0-9a-f-]+)">', rows)
        assert ("First page</a>" in page) == (pages > 1)
        following = re.search(r'<a href="([^"]+)" rel="next">Next page</a>', page)
        url = html.unescape(following.group(1)) if following else None
    assert pages == 3
    assert len(seen) == len(set(seen)) == 46  # the creation's test delivery and the 45
    assert set(seen) == stored


async def test_recover_since_queues_the_failed_deliveries_of_that_range_again(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer = await make_consumer(db_engine, "write")
    created = await subscribe(client, consumer.headers, http_receiver.url)
    await only_test_delivery_settled(db_engine, created["id"])
    await set_deliveries(
        db_engine, created["id"], [("failed", timedelta(hours=1)), ("failed", timedelta(days=3))]
    )
    token = await signed_in(client, consumer)
    since = (datetime.now(UTC) - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M")
    response = await client.post(
        f"/portal/endpoints/{created['id']}/recover", data={"since": since, "csrf_token": token}
    )
    assert response.status_code == 303
    page = await client.get(response.headers["location"])
    assert "Queued now: 1 delivery that failed, created since" in page.text
    listed = await client.get(
        f"/webhooks/subscriptions/{created['id']}/deliveries?status=failed",
        headers=consumer.headers,
    )
    assert len(listed.json()["data"]) == 1  # the one from 3 days ago stays failed


async def test_recover_without_a_moment_says_to_pick_one(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    _consumer, created, token = await endpoint_and_session(client, db_engine, http_receiver.url)
    response = await client.post(
        f"/portal/endpoints/{created['id']}/recover", data={"since": "", "csrf_token": token}
    )
    page = await client.get(response.headers["location"])
    assert "Pick the date and time to recover from." in page.text


# -- charts ----------------------------------------------------------------------------------


async def test_the_endpoint_page_charts_deliveries_by_outcome_and_attempt_latency(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer = await make_consumer(db_engine, "write")
    created = await subscribe(client, consumer.headers, http_receiver.url)
    await only_test_delivery_settled(db_engine, created["id"])
    await set_deliveries(
        db_engine,
        created["id"],
        [("succeeded", timedelta(minutes=5))] * 2
        + [("failed", timedelta(hours=3)), ("succeeded", timedelta(days=3))],
    )
    async with db_engine.begin() as connection:
        await connection.execute(
            text(
                "INSERT INTO delivery_attempts (delivery_id, attempted_at, status_code, duration_ms)"
                " SELECT id, now(), 200, 100 FROM deliveries WHERE subscription_id = :sid"
                " AND created_at > now() - interval '10 minutes'"
            ),
            {"sid": created["id"]},
        )
    await signed_in(client, consumer)
    page = (await client.get(f"/portal/endpoints/{created['id']}")).text
    hourly = chart_of(page, "chart-hourly")
    assert len(hourly["x"]) == 24
    totals = {s["label"]: sum(s["values"]) for s in hourly["series"]}
    assert totals == {"succeeded": 2, "failed": 1, "pending": 0}
    # Five minutes ago is this hour or, early in an hour, the one before: the last two buckets.
    assert sum(hourly["series"][0]["values"][-2:]) == 2
    daily = chart_of(page, "chart-daily")
    assert len(daily["x"]) == 7
    assert {s["label"]: sum(s["values"]) for s in daily["series"]}["succeeded"] == 3
    latency = chart_of(page, "chart-latency")
    assert [s["label"] for s in latency["series"]] == ["p50", "p95"]
    # Latency is charted in its delivery's hour (the rollup): the same last two buckets.
    assert 100.0 in latency["series"][0]["values"][-2:]
    assert latency["series"][0]["values"][0] is None  # no attempt then: a gap, not a zero


# -- receiver snippets -----------------------------------------------------------------------


def snippet_of(page: str, language: str) -> str:
    found = re.search(rf'<code id="snippet-{language}">(.*?)</code>', page, re.S)
    assert found, language
    return html.unescape(found.group(1))


async def test_snippets_name_the_endpoint_and_leave_the_secret_to_the_environment(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer = await make_consumer(db_engine, "write")
    created = await subscribe(client, consumer.headers, http_receiver.url)
    await signed_in(client, consumer)
    page = (await client.get(f"/portal/endpoints/{created['id']}")).text
    for language, reads_env in (
        ("python", 'os.environ["WEBHOOK_SECRET"]'),
        ("node", "process.env.WEBHOOK_SECRET"),
        ("go", 'os.Getenv("WEBHOOK_SECRET")'),
    ):
        code = snippet_of(page, language)
        assert f"Endpoint {created['id']} at {http_receiver.url}" in code
        assert reads_env in code
    assert created["secret"] not in page


async def test_snippets_carry_the_secret_right_after_it_is_revealed(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    _consumer, created, token = await endpoint_and_session(client, db_engine, http_receiver.url)
    rotated = await client.post(
        f"/portal/endpoints/{created['id']}/rotate-secret", data={"csrf_token": token}
    )
    secret = re.search(r'id="secret" class="secret" readonly value="([^"]+)"', rotated.text)
    assert secret
    for language in ("python", "node", "go"):
        assert f'"{secret.group(1)}"' in snippet_of(rotated.text, language)


async def test_the_python_snippet_verifies_a_real_signed_delivery(
    worker: Settings,
    client: httpx.AsyncClient,
    db_engine: AsyncEngine,
    http_receiver: HttpReceiver,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    consumer = await make_consumer(db_engine, "write")
    created = await subscribe(client, consumer.headers, http_receiver.url)
    await http_receiver.wait_for(2)  # the probe, then the signed test event
    delivery = next(r for r in http_receiver.requests if r.method == "POST")
    await signed_in(client, consumer)
    page = (await client.get(f"/portal/endpoints/{created['id']}")).text
    monkeypatch.setenv("WEBHOOK_SECRET", created["secret"])
    namespace: dict[str, Any] = {}
    exec(compile(snippet_of(page, "python"), "snippet.py", "exec"), namespace)  # noqa: S102
    event = namespace["verify"](delivery.body, delivery.headers)
    assert event["type"] == "webhook.test"
    assert event["data"]["subscription_id"] == created["id"]
    with pytest.raises(WebhookVerificationError):
        namespace["verify"](
            delivery.body.replace(b"webhook.test", b"webhook.fake"), delivery.headers
        )
