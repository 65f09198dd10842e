"""The portal's ordered delivery in a real Chromium against `serve` and `worker` as real
processes: the endpoint page shows its held keys (key, the delivery at its head, why, next
attempt) and the ordering editor, whose refused expression comes back inline (422); a held
delivery's page names what held it and for how long. Accessible (axe-core), within the CSP,
screenshotted at 1280 and 390 px."""

from __future__ import annotations

import uuid

from servicekit.testing import HttpReceiver
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.factories import PortalInBrowser, only_test_delivery_settled
from tests.test_portal_browser import hub, hub_processes

__all__ = ["hub", "hub_processes"]  # the fixtures, shared with the portal's other browser tests

# A key held for five minutes by its head (two attempts answered 500), two deliveries behind
# it, and one that was held before by another delivery for 42 seconds.
_HELD = """
WITH s AS (SELECT CAST(:sid AS uuid) AS id)
INSERT INTO deliveries (id, subscription_id, event_id, event_type, payload, event_time, status,
                        attempts, next_attempt_at, last_attempt_at, last_status_code,
                        last_error, created_at, order_key, order_seq, held_by, held_since,
                        held_until, completed_at, first_status_code, first_duration_ms)
SELECT v.id, s.id, v.event_id, 'order.paid', CAST(v.payload AS json), now(), v.status,
       v.attempts, v.next_at, v.last_at, v.code, NULL, now() - interval '6 minutes', 'order-17',
       v.seq, v.held_by, v.held_since, v.held_until, v.completed_at,
       CASE WHEN v.status = 'succeeded' THEN 200 END, CASE WHEN v.status = 'succeeded' THEN 12 END
FROM s, (VALUES
    (CAST(:head AS uuid), gen_random_uuid(), '{"order_id": "order-17", "step": 1}', 'pending',
     2, now() + interval '1 hour', now() - interval '1 minute', 500, 1001, NULL::uuid,
     NULL::timestamptz, NULL::timestamptz, NULL::timestamptz),
    (gen_random_uuid(), gen_random_uuid(), '{"order_id": "order-17", "step": 2}', 'pending',
     0, NULL, NULL, NULL, 1002, NULL, NULL, NULL, NULL),
    (gen_random_uuid(), gen_random_uuid(), '{"order_id": "order-17", "step": 3}', 'pending',
     0, NULL, NULL, NULL, 1003, NULL, NULL, NULL, NULL),
    (CAST(:earlier AS uuid), gen_random_uuid(), '{"order_id": "order-17", "step": 0}',
     'succeeded', 1, NULL, now() - interval '7 minutes', 200, 1000, CAST(:holder AS uuid),
     now() - interval '8 minutes', now() - interval '8 minutes' + interval '42 seconds',
     now() - interval '7 minutes')
) AS v(id, event_id, payload, status, attempts, next_at, last_at, code, seq, held_by,
       held_since, held_until, completed_at)
"""
_QUEUE = """
INSERT INTO ordered_pending (subscription_id, order_key, order_seq, delivery_id, log_time,
                             blocked_since)
SELECT subscription_id, order_key, order_seq, id, log_time,
       CASE WHEN order_seq = 1001 THEN now() - interval '5 minutes' END
FROM deliveries WHERE subscription_id = :sid AND status = 'pending' AND order_key IS NOT NULL
"""


async def test_the_endpoint_page_shows_a_held_key_and_the_ordering_editor_refuses_inline(
    portal: PortalInBrowser, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    page, hub = portal.page, portal.hub
    consumer, created = await portal.endpoint(
        http_receiver.url, description="Orders", ordering={"key": None}
    )
    await only_test_delivery_settled(db_engine, created["id"])
    head, earlier, holder = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    async with db_engine.begin() as connection:
        parameters = {"sid": created["id"], "head": head, "earlier": earlier, "holder": holder}
        await connection.execute(text(_HELD), parameters)
        await connection.execute(text(_QUEUE), {"sid": created["id"]})
    await portal.open_endpoint(consumer, created["id"])

    held = page.locator("#held-keys")
    await held.wait_for()
    assert await held.get_by_text("order-17").is_visible()
    assert await held.get_by_text("HTTP 500").count() >= 1
    assert await held.get_by_role("cell", name="2", exact=True).is_visible()  # behind it
    assert "one at a time" in (await page.locator("#ordering-summary").inner_text())
    await page.locator("#ordering").scroll_into_view_if_needed()
    await portal.assert_clean("portal-ordering-held")

    await page.get_by_label("By key").check()
    await page.get_by_label("Key expression (CEL)").fill("event.data.order_id +")
    await page.get_by_role("button", name="Save ordering").click()
    error = page.locator("#f-ordering-key-error")
    await error.wait_for()
    assert "column 22" in (await error.inner_text())
    assert await page.get_by_label("Key expression (CEL)").input_value() == (
        "event.data.order_id +"
    )
    # What is stored is unchanged, and said so.
    assert "event.data.order_id" not in (await page.locator("#ordering-summary").inner_text())
    await portal.assert_clean("portal-ordering-error")

    await page.get_by_label("Key expression (CEL)").fill("event.data.order_id")
    await page.get_by_role("button", name="Save ordering").click()
    await page.get_by_text("Ordering saved.").wait_for()
    assert "event.data.order_id" in (await page.locator("#ordering-summary").inner_text())
    stored = await hub.get(f"/webhooks/subscriptions/{created['id']}", headers=consumer.headers)
    assert stored.json()["ordering"] == {"key": "event.data.order_id"}

    await page.goto(f"{hub.base_url}/portal/deliveries/{earlier}")
    held_by = page.locator("#held-by")
    await held_by.wait_for()
    assert str(holder) in await held_by.inner_text()
    assert "42.0 s" in await held_by.inner_text()
    await portal.assert_clean("portal-delivery-held")
