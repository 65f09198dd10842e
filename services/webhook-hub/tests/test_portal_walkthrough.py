"""Issue 35's walk-through of the portal, in a real Chromium against `serve` and `worker` as
real processes (the fixtures of `test_portal_browser`): each problem a user hit, shown fixed,
axe-clean, with the before/after screenshots of the README's note."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from servicekit.embedded.network import free_port
from servicekit.testing import HttpReceiver
from servicekit.testing.receiver import PlannedResponse
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.factories import (
    Consumer,
    PortalInBrowser,
    make_consumer,
    only_test_delivery_settled,
    subscribe,
)
from tests.test_portal_browser import hub, hub_processes

__all__ = ["hub", "hub_processes"]  # the fixtures, shared with test_portal_browser

REFUSED = "ConnectionRefusedError: [Errno 111] Connection refused"


async def add_deliveries(engine: AsyncEngine, subscription_id: str, *rows: dict[str, Any]) -> None:
    """Deliveries of `subscription_id`: each row's `status`, `age` (created this long ago),
    and optionally `event_type`, `attempts`, `next_in` (next attempt this far ahead),
    `error`, `code` (the last answer)."""
    async with engine.begin() as connection:
        for row in rows:
            await connection.execute(
                text(
                    "INSERT INTO deliveries (id, subscription_id, event_id, event_type, payload,"
                    " event_time, status, attempts, created_at, next_attempt_at,"
                    " last_attempt_at, last_error, last_status_code) VALUES (:id, :sid, :eid,"
                    " :type, CAST(:payload AS json), now(), CAST(:status AS text), CAST(:attempts AS int), now() - :age,"
                    " CASE WHEN CAST(:status AS text) = 'pending' THEN now() + :next_in END,"
                    " CASE WHEN CAST(:attempts AS int) > 0 THEN now() - :age / 2 END, :error, :code)"
                ),
                {
                    "id": uuid.uuid4(),
                    "sid": subscription_id,
                    "eid": row.get("event_id", uuid.uuid4()),
                    "type": row.get("event_type", "order.paid"),
                    "payload": row.get("payload", '{"order_id": 1042}'),
                    "status": row["status"],
                    "attempts": row.get("attempts", 1),
                    "age": row["age"],
                    "next_in": row.get("next_in", timedelta(minutes=7)),
                    "error": row.get("error"),
                    "code": row.get("code"),
                },
            )


async def settle_test_delivery(engine: AsyncEngine, subscription_id: str) -> None:
    """Wait until the worker is done with the creation's test delivery (its row is written
    after its first attempt, and its outcome would overwrite the health figures a scenario
    sets), then file it 30 days back."""
    for _ in range(150):
        async with engine.begin() as connection:
            done = await connection.scalar(
                text(
                    "SELECT count(*) FROM deliveries WHERE subscription_id = :sid"
                    " AND event_type = 'webhook.test' AND status <> 'pending'"
                ),
                {"sid": subscription_id},
            )
        if done:
            break
        await asyncio.sleep(0.1)
    await only_test_delivery_settled(engine, subscription_id)


async def set_health(
    engine: AsyncEngine, subscription_id: str, failures: int, last_success: timedelta | None
) -> None:
    async with engine.begin() as connection:
        await connection.execute(
            text(
                "UPDATE subscriptions SET failure_count = :failures,"
                " last_delivery_at = now() - CAST(:age AS interval) WHERE id = :sid"
            ),
            {"sid": subscription_id, "failures": failures, "age": last_success},
        )


async def filter_scenario(
    hub: httpx.AsyncClient, engine: AsyncEngine, consumer: Consumer, receiver: HttpReceiver
) -> str:
    """An endpoint with a few deliveries of two event types over the last hours."""
    created = await subscribe(
        hub, consumer.headers, f"{receiver.url}/orders", ["order.paid", "order.created"]
    )
    await only_test_delivery_settled(engine, created["id"])
    hour = timedelta(hours=1)
    await add_deliveries(
        engine,
        created["id"],
        *[{"status": "succeeded", "age": hour * n, "code": 200} for n in (1, 3, 4)],
        *[
            {"status": "succeeded", "age": hour * n, "event_type": "order.created", "code": 200}
            for n in (2, 5)
        ],
    )
    return str(created["id"])


async def down_receiver_scenario(
    hub: httpx.AsyncClient, engine: AsyncEngine, consumer: Consumer
) -> str:
    """An endpoint whose receiver is down: deliveries waiting for their next attempt, one
    that gave up."""
    port = free_port()  # nothing listens there
    created = await subscribe(
        hub, consumer.headers, f"http://127.0.0.1:{port}/hooks", description="Warehouse"
    )
    await settle_test_delivery(engine, created["id"])
    error = REFUSED
    minute = timedelta(minutes=1)
    await add_deliveries(
        engine,
        created["id"],
        {"status": "failed", "age": minute * 50, "attempts": 8, "error": error},
        *[
            {"status": "pending", "age": minute * n, "attempts": 3, "error": error}
            for n in (4, 9, 15)
        ],
    )
    await set_health(engine, created["id"], 11, None)
    return str(created["id"])


async def health_scenario(
    hub: httpx.AsyncClient, engine: AsyncEngine, consumer: Consumer, receiver: HttpReceiver
) -> tuple[str, str]:
    """Two failing endpoints: one that succeeded earlier today and fails now (its deliveries
    waiting for retries), one that never succeeded."""
    hour = timedelta(hours=1)
    earlier = await subscribe(hub, consumer.headers, f"{receiver.url}/earlier")
    await settle_test_delivery(engine, earlier["id"])
    await add_deliveries(
        engine,
        earlier["id"],
        *[{"status": "succeeded", "age": hour * 3 + timedelta(minutes=n)} for n in range(5)],
        *[
            {"status": "pending", "age": timedelta(minutes=n), "attempts": 1, "code": 503}
            for n in (5, 10, 15, 20)
        ],
    )
    await set_health(engine, earlier["id"], 4, hour * 3)
    never = await subscribe(hub, consumer.headers, f"{receiver.url}/never")
    await settle_test_delivery(engine, never["id"])
    await add_deliveries(
        engine,
        never["id"],
        *[{"status": "pending", "age": timedelta(minutes=n), "code": 500} for n in (3, 6)],
    )
    await set_health(engine, never["id"], 2, None)
    return str(earlier["id"]), str(never["id"])


# -- HTTP: recovery and Retry selected (problem 3) ------------------------------------------


async def statuses(engine: AsyncEngine, subscription_id: str) -> list[tuple[str, bool]]:
    """Each delivery's status and whether it is due now, oldest first."""
    async with engine.begin() as connection:
        rows = await connection.execute(
            text(
                "SELECT status, next_attempt_at <= now() FROM deliveries"
                " WHERE subscription_id = :sid AND event_type <> 'webhook.test'"
                " ORDER BY created_at"
            ),
            {"sid": subscription_id},
        )
        return [(str(status), bool(due)) for status, due in rows]


async def test_the_log_filters_by_event_type_alone_with_status_left_at_any(
    portal: PortalInBrowser,
    hub: httpx.AsyncClient,
    db_engine: AsyncEngine,
    http_receiver: HttpReceiver,
) -> None:
    page = portal.page
    consumer = await make_consumer(db_engine, "write")
    sid = await filter_scenario(hub, db_engine, consumer, http_receiver)
    await portal.open_endpoint(consumer, sid)
    await page.get_by_label("Event type").select_option("order.created")
    rows = await portal.filtered_rows("**status=&event_type=order.created**")
    assert await rows.count() == 2
    assert await page.locator("#deliveries").get_by_text("order.paid").count() == 0
    await page.locator("#chart-hourly canvas").wait_for()
    await portal.both_schemes("portal-filter-after")


async def test_a_down_receivers_deliveries_read_as_retrying_and_recover_and_retry_take_them(
    portal: PortalInBrowser,
    hub: httpx.AsyncClient,
    db_engine: AsyncEngine,
) -> None:
    page = portal.page
    consumer = await make_consumer(db_engine, "write")
    sid = await down_receiver_scenario(hub, db_engine, consumer)
    await portal.open_endpoint(consumer, sid)
    log = page.locator("#deliveries")
    await log.get_by_text("retrying").first.wait_for()
    assert await log.locator(".badge-warning", has_text="retrying").count() == 3
    assert await log.get_by_text("next attempt at").count() == 3
    # The four, and the creation's test event, which failed the same way.
    assert await log.get_by_text("Connection refused by the receiver").count() == 5
    assert await log.get_by_text("Errno 111").count() == 0
    await portal.both_schemes("portal-retrying-after")

    since = (datetime.now(UTC) - timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M")
    await page.get_by_label("Created since (UTC)").fill(since)
    await page.get_by_role("button", name="Recover failed deliveries").click()
    flash = page.locator("#flashes .flash")
    await flash.wait_for()
    assert (await flash.text_content() or "").startswith(
        "Queued now: 1 delivery that failed and 3 deliveries waiting for a retry"
    )

    await add_deliveries(
        db_engine,
        sid,
        *[{"status": "failed", "age": timedelta(minutes=n), "error": REFUSED} for n in (1, 2)],
        {"status": "succeeded", "age": timedelta(seconds=30), "code": 200},
    )
    await page.goto(f"{hub.base_url}/portal/endpoints/{sid}?status=failed")
    boxes = page.get_by_role("checkbox", name="Select the order.paid delivery")
    await boxes.first.wait_for()
    for n in range(2):
        await boxes.nth(n).check()
    await page.get_by_role("button", name="Retry selected").click()
    await page.get_by_text("2 deliveries queued for a retry now.").wait_for()


async def test_endpoint_health_figures_agree_and_a_403_probe_is_not_green(
    portal: PortalInBrowser,
    hub: httpx.AsyncClient,
    db_engine: AsyncEngine,
    http_receiver: HttpReceiver,
) -> None:
    page = portal.page
    consumer = await make_consumer(db_engine, "write")
    earlier, never = await health_scenario(hub, db_engine, consumer, http_receiver)
    await portal.open(consumer)
    row = page.locator("tr", has=page.locator(f"a[href='/portal/endpoints/{earlier}']"))
    await row.wait_for()
    assert await row.locator("td[data-label='Failed attempts in a row']").text_content() == "4"
    day = row.locator("td[data-label='Last 24 h']")
    assert await day.text_content() == "5 delivered, 4 pending (100 % of finished)"
    other = page.locator("tr", has=page.locator(f"a[href='/portal/endpoints/{never}']"))
    assert await other.locator("td[data-label='Last 24 h']").text_content() == (
        "0 delivered, 2 pending (none finished)"
    )
    assert await other.locator("td[data-label='Last success']").text_content() == "never"
    await portal.both_schemes("portal-health-after")

    http_receiver.default = PlannedResponse(403)
    await page.goto(f"{hub.base_url}/portal/endpoints/new")
    await page.get_by_label("Endpoint URL").fill(f"{http_receiver.url}/forbidden")
    await page.get_by_role("checkbox", name="order.paid").check()
    await page.get_by_role("button", name="Create endpoint").click()
    probe = page.locator("#probe")
    await probe.get_by_text("answered with 403").wait_for()
    assert await probe.locator(".badge-ok").count() == 0
    assert await probe.locator(".badge-warning").count() == 1
    await portal.both_schemes("portal-probe-after")


async def test_a_deliverys_payload_headers_and_body_each_have_a_copy_button(
    portal: PortalInBrowser,
    hub: httpx.AsyncClient,
    db_engine: AsyncEngine,
    http_receiver: HttpReceiver,
) -> None:
    page = portal.page
    await page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    consumer = await make_consumer(db_engine, "write")
    created = await subscribe(hub, consumer.headers, http_receiver.url)
    await settle_test_delivery(db_engine, created["id"])
    await portal.open_endpoint(consumer, created["id"])
    await page.locator("#deliveries a").first.click()
    await page.locator("#attempts tr").first.wait_for()
    # The click's navigation: its scripts (the copy buttons' handler) run by "load", which a
    # loaded machine reaches well after the rows are in the DOM.
    await page.wait_for_load_state("load")
    for button, source in (
        ("Copy the payload", "#event-data"),
        ("Copy the body", "#request-body"),
        ("Copy the headers of attempt 1", "#request-1"),
    ):
        await page.get_by_role("button", name=button).click()
        flash = page.locator("#flashes p")
        await flash.wait_for()
        assert await flash.text_content() == "Copied to the clipboard."
        copied = await page.evaluate("navigator.clipboard.readText()")
        assert copied == await page.locator(source).text_content()
        await page.evaluate("document.getElementById('flashes').replaceChildren()")
    assert await page.locator("#flashes").get_attribute("aria-live") == "polite"
    await portal.assert_clean("portal-delivery-copy")


async def test_names_outweigh_descriptions_and_the_snippet_is_whole_on_a_phone(
    portal: PortalInBrowser,
    hub: httpx.AsyncClient,
    db_engine: AsyncEngine,
    http_receiver: HttpReceiver,
) -> None:
    page = portal.page
    consumer = await make_consumer(db_engine, "write")
    sid = await filter_scenario(hub, db_engine, consumer, http_receiver)
    await portal.open(consumer)
    await page.goto(f"{hub.base_url}/portal/endpoints/new")
    label = page.locator("fieldset.choices label", has_text="subscription.disabled")
    weights = await label.evaluate(
        "l => [getComputedStyle(l.querySelector('code')).fontWeight,"
        " getComputedStyle(l.querySelector('.muted')).fontWeight]"
    )
    assert int(weights[0]) > int(weights[1])
    await page.set_viewport_size({"width": 390, "height": 900})
    await page.goto(f"{hub.base_url}/portal/endpoints/{sid}")
    snippet = page.locator("pre.code").first
    sizes = await snippet.evaluate(
        "p => [p.scrollHeight, p.clientHeight, p.scrollWidth, p.clientWidth]"
    )
    assert sizes[0] <= sizes[1]
    assert sizes[2] <= sizes[3]
    heading = await page.locator("h1").evaluate("h => h.scrollWidth <= h.clientWidth")
    assert heading
    await page.locator("#chart-hourly canvas").wait_for()
    await page.set_viewport_size({"width": 1280, "height": 900})
    await portal.both_schemes("portal-visual-after")


async def test_a_long_endpoint_url_stays_inside_its_card_on_a_phone(
    portal: PortalInBrowser,
    hub: httpx.AsyncClient,
    db_engine: AsyncEngine,
    http_receiver: HttpReceiver,
) -> None:
    page = portal.page
    consumer = await make_consumer(db_engine, "write")
    await subscribe(hub, consumer.headers, f"{http_receiver.url}/{'warehouse-orders-' * 6}hook")
    await portal.open(consumer)
    await page.set_viewport_size({"width": 390, "height": 900})
    await page.goto(f"{hub.base_url}/portal/endpoints")
    link = page.locator("table.data td a").first
    await link.wait_for()
    inside = await link.evaluate(
        "a => a.getBoundingClientRect().right <= a.closest('table').getBoundingClientRect().right"
    )
    assert inside
    await page.set_viewport_size({"width": 1280, "height": 900})
    await portal.both_schemes("portal-long-url")
