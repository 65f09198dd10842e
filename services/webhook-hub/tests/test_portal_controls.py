"""The portal controls issue 35 adds (what Svix's and Hookdeck's consoles offer): searching the
delivery log, in a real Chromium against `serve` and `worker` (the fixtures of
`test_portal_browser`), axe-clean at 1280 and 390 px in light and dark; and the rules under
them, on the service and as pure code."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta

import httpx
from servicekit.db.engine import create_session_factory
from servicekit.testing import HttpReceiver
from servicekit.testing.receiver import ReceivedRequest
from servicekit.web.pages.csrf import CSRF_HEADER
from sqlalchemy.ext.asyncio import AsyncEngine
from webhook_hub.deliveries.search import LogSearch, parse_log_search
from webhook_hub.deliveries.service import DeliveryService
from webhook_hub.event_types.service import matching
from webhook_hub.models import EventType, Subscription
from webhook_hub.portal.paging import MAX_BACK, PageLink, page_links
from webhook_hub.subscriptions.service import example_choices

from tests.factories import (
    Consumer,
    PortalInBrowser,
    make_consumer,
    only_test_delivery_settled,
    registered_type,
    subscribe,
)
from tests.test_portal_browser import hub, hub_processes
from tests.test_portal_walkthrough import add_deliveries

__all__ = ["hub", "hub_processes"]  # the fixtures, shared with test_portal_browser

HOUR = timedelta(hours=1)


async def orders_endpoint(
    hub: httpx.AsyncClient, engine: AsyncEngine, consumer: Consumer, receiver: HttpReceiver
) -> str:
    """An endpoint with four order.paid deliveries of orders 1041 to 1044, newest last."""
    created = await subscribe(hub, consumer.headers, f"{receiver.url}/orders", ["order.paid"])
    await only_test_delivery_settled(engine, created["id"])
    await add_deliveries(
        engine,
        created["id"],
        *[
            {
                "status": "succeeded",
                "age": HOUR * (5 - n),
                "code": 200,
                "payload": f'{{"order_id": 104{n}, "customer": "c-{n}@example.com"}}',
            }
            for n in (1, 2, 3, 4)
        ],
    )
    return str(created["id"])


# -- the search box, as pure code -------------------------------------------------------------


def test_an_id_shaped_search_is_an_event_id_in_any_spelling() -> None:
    event_id = uuid.uuid4()
    assert parse_log_search(f"  {str(event_id).upper()} ") == LogSearch(event_id=event_id)


def test_any_other_search_is_payload_text_and_an_empty_box_no_search() -> None:
    assert parse_log_search(" 1042 ") == LogSearch(payload_text="1042")
    assert parse_log_search("   ") is None


def test_a_payload_search_matches_percent_and_underscore_literally() -> None:
    assert LogSearch(payload_text="50%_off\\").like_pattern() == "%50\\%\\_off\\\\%"


# -- Previous page, as pure code ----------------------------------------------------------------


def test_next_carries_the_page_it_leaves_and_previous_takes_it_back() -> None:
    first = page_links(None, [], "c2")
    assert first.previous is None
    assert first.on_first
    assert first.next == PageLink("c2", [""])
    second = page_links("c2", [""], "c3")
    assert second.previous == PageLink(None, [])
    assert second.next == PageLink("c3", ["", "c2"])
    assert page_links("c3", ["", "c2"], None).previous == PageLink("c2", [""])


def test_only_the_last_pages_are_kept_for_previous() -> None:
    back = [f"c{n}" for n in range(MAX_BACK + 5)]
    following = page_links("here", back, "next").next
    assert following is not None
    assert following.back == [*back[-(MAX_BACK - 1) :], "here"]


def test_a_page_reached_without_its_way_back_has_no_previous_link() -> None:
    assert page_links("c7", [], "c8").previous is None
    assert page_links("c7", ["x" * 501], None).previous is None


# -- the bounded payload search, on the service -----------------------------------------------


async def test_a_payload_search_page_reads_at_most_its_scan_limit_and_next_searches_on(
    db_engine: AsyncEngine, committed_subscription: Subscription
) -> None:
    sid = str(committed_subscription.id)
    await add_deliveries(
        db_engine,
        sid,
        *[
            {"status": "succeeded", "age": HOUR * n, "payload": f'{{"order_id": {n}}}'}
            for n in range(1, 6)
        ],
        {"status": "succeeded", "age": HOUR * 6, "payload": '{"order_id": "wanted"}'},
    )
    sessions = create_session_factory(db_engine)
    search = parse_log_search("WANTED")
    pages = []
    cursor = None
    while True:
        async with sessions() as db, db.begin():
            page = await DeliveryService(db).page(
                committed_subscription.owner,
                committed_subscription.id,
                limit=50,
                cursor=cursor,
                status=None,
                event_type=None,
                search=search,
                scan_limit=2,
            )
        pages.append([d.payload for d in page.items])
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    # Six deliveries read two a page: the match is on the third page, and no page reads past.
    assert pages == [[], [], [{"order_id": "wanted"}]]


# -- the search box, in the browser -----------------------------------------------------------


async def test_the_log_search_finds_a_delivery_by_its_event_id(
    portal: PortalInBrowser,
    hub: httpx.AsyncClient,
    db_engine: AsyncEngine,
    http_receiver: HttpReceiver,
) -> None:
    page = portal.page
    consumer = await make_consumer(db_engine, "write")
    sid = await orders_endpoint(hub, db_engine, consumer, http_receiver)
    event_id = uuid.uuid4()
    await add_deliveries(
        db_engine,
        sid,
        {"status": "failed", "age": HOUR * 2, "event_id": event_id, "payload": '{"order_id": 7}'},
    )
    await portal.open_endpoint(consumer, sid)
    await page.get_by_label("Search").fill(str(event_id))
    rows = await portal.filtered_rows(f"**q={event_id}**")
    assert await rows.count() == 1
    await rows.first.locator("a").first.click()
    await page.locator("#event-data", has_text='"order_id": 7').wait_for()
    await page.go_back()
    await portal.both_schemes("portal-search-event-id")


async def test_the_log_search_finds_deliveries_by_a_value_in_their_payload(
    portal: PortalInBrowser,
    hub: httpx.AsyncClient,
    db_engine: AsyncEngine,
    http_receiver: HttpReceiver,
) -> None:
    page = portal.page
    consumer = await make_consumer(db_engine, "write")
    sid = await orders_endpoint(hub, db_engine, consumer, http_receiver)
    await portal.open_endpoint(consumer, sid)
    await page.get_by_label("Search").fill("C-3@EXAMPLE")
    rows = await portal.filtered_rows("**q=C-3%40EXAMPLE**")
    assert await rows.count() == 1
    assert await page.get_by_label("Search").input_value() == "C-3@EXAMPLE"
    await page.get_by_text("A payload search reads up to 10,000 deliveries a page").wait_for()
    await rows.first.locator("a").first.click()
    await page.locator("#event-data", has_text='"order_id": 1043').wait_for()
    await page.go_back()
    await portal.both_schemes("portal-search-payload")


# -- Previous page, in the browser ---------------------------------------------------------------


async def test_previous_page_goes_back_through_the_log_to_the_first_page(
    portal: PortalInBrowser,
    hub: httpx.AsyncClient,
    db_engine: AsyncEngine,
    http_receiver: HttpReceiver,
) -> None:
    page = portal.page
    consumer = await make_consumer(db_engine, "write")
    sid = await orders_endpoint(hub, db_engine, consumer, http_receiver)
    minute = timedelta(minutes=1)
    await add_deliveries(
        db_engine, sid, *[{"status": "succeeded", "age": minute * n} for n in range(1, 110)]
    )
    await portal.open_endpoint(consumer, sid)
    first_row = page.locator("#deliveries tr a").first
    seen = [await first_row.get_attribute("href")]
    pages = page.get_by_role("navigation", name="Delivery log pages")
    for _ in range(2):
        await pages.get_by_role("link", name="Next page").click()
        await page.wait_for_load_state()
        seen.append(await first_row.get_attribute("href"))
    assert len(set(seen)) == 3
    await pages.get_by_role("link", name="Previous page").click()
    await page.wait_for_load_state()
    assert await first_row.get_attribute("href") == seen[1]
    await portal.both_schemes("portal-previous-page")
    await pages.get_by_role("link", name="Previous page").click()
    await page.wait_for_load_state()
    assert await first_row.get_attribute("href") == seen[0]
    assert await pages.get_by_role("link", name="Previous page").count() == 0
    assert "cursor=" not in page.url


# -- search in the event catalog -----------------------------------------------------------------


def test_the_catalog_search_wants_every_word_in_the_name_or_description() -> None:
    paid = EventType(name="order.paid", description="An order was paid by card")
    created = EventType(name="order.created", description="A cart became an order")
    assert matching([paid, created], " ORDER  card ") == [paid]
    assert matching([paid, created], "order") == [paid, created]
    assert matching([paid, created], "") == [paid, created]
    assert matching([paid, created], "refund") == []


async def test_the_event_catalog_searches_names_and_descriptions_without_script(
    portal: PortalInBrowser,
    hub: httpx.AsyncClient,
    db_engine: AsyncEngine,
) -> None:
    page = portal.page
    consumer = await make_consumer(db_engine, "admin")
    settled = await registered_type(
        hub, consumer, "invoice.settled", "An invoice was settled by bank transfer", {"id": 1}
    )
    await portal.open(consumer)
    await page.get_by_role("link", name="Event catalog").click()
    await page.get_by_label("Search event types").fill("BANK transfer")
    await page.get_by_role("button", name="Search").click()
    await page.wait_for_url("**/portal/event-types?q=BANK+transfer")
    sections = page.locator("section.event-type")
    assert await sections.count() == 1
    await page.get_by_role("heading", name=settled).wait_for()
    await page.get_by_role("status").get_by_text("1 of").wait_for()
    await portal.both_schemes("portal-catalog-search")
    await page.get_by_label("Search event types").fill("run.")
    await page.get_by_role("button", name="Search").click()
    await page.wait_for_url("**q=run.")
    assert sorted(await sections.locator("h2").all_inner_texts()) == [
        "run.completed",
        "run.failed",
    ]
    await page.get_by_role("link", name="Show all").click()
    await page.locator("#type-order\\.paid").wait_for()


# -- send an example of a chosen event type --------------------------------------------------------


async def delivered_of(receiver: HttpReceiver, event_type: str) -> ReceivedRequest:
    """The first webhook of `event_type` the receiver got (after the creation's probe and
    test event, in whatever order they came)."""
    for count in range(1, 6):
        for request in await receiver.wait_for(count):
            if request.body and json.loads(request.body).get("type") == event_type:
                return request
    raise AssertionError(f"no {event_type} webhook arrived")


def test_examples_are_offered_of_the_active_types_the_endpoint_receives() -> None:
    paid = EventType(name="order.paid")
    created = EventType(name="order.created")
    retired = EventType(name="order.retired", is_active=False)
    catalog = [paid, created, retired]
    named = Subscription(
        owner="o",
        consumer_id=uuid.uuid4(),
        secret="s",
        endpoint_url="https://x.test",
        events=["order.paid"],
    )
    assert example_choices(named, catalog) == [paid]
    everything = Subscription(
        owner="o", consumer_id=uuid.uuid4(), secret="s", endpoint_url="https://x.test", events=["*"]
    )
    assert example_choices(everything, catalog) == [paid, created]


async def test_send_an_example_delivers_the_chosen_types_example_payload(
    portal: PortalInBrowser,
    hub: httpx.AsyncClient,
    db_engine: AsyncEngine,
    http_receiver: HttpReceiver,
) -> None:
    page = portal.page
    consumer = await make_consumer(db_engine, "write")
    created = await subscribe(
        hub, consumer.headers, f"{http_receiver.url}/orders", ["order.paid", "run.completed"]
    )
    await portal.open_endpoint(consumer, created["id"])
    picker = page.get_by_label("Example to send")
    assert await picker.locator("option").all_inner_texts() == ["order.paid", "run.completed"]
    await portal.both_schemes("portal-send-example")
    await picker.select_option("run.completed")
    await page.get_by_role("button", name="Send an example").click()
    await page.get_by_text("An example run.completed event is on its way").wait_for()
    received = await delivered_of(http_receiver, "run.completed")
    assert json.loads(received.body)["data"] == {"run_id": 1}
    assert "webhook-signature" in received.headers
    await page.locator("#deliveries", has_text="run.completed").wait_for()


async def test_a_read_session_is_offered_no_example_and_its_post_is_refused(
    portal: PortalInBrowser,
    hub: httpx.AsyncClient,
    db_engine: AsyncEngine,
    http_receiver: HttpReceiver,
) -> None:
    page = portal.page
    writer = await make_consumer(db_engine, "write")
    created = await subscribe(hub, writer.headers, http_receiver.url, ["order.paid"])
    await portal.open_endpoint(
        await make_consumer(db_engine, "read", owner=writer.owner), created["id"]
    )
    assert await page.get_by_label("Example to send").count() == 0
    token = json.loads(await page.locator("body").get_attribute("hx-headers") or "{}")[CSRF_HEADER]
    refused = await page.request.post(
        f"{hub.base_url}/portal/endpoints/{created['id']}/example",
        form={"csrf_token": token, "event_type": "order.paid"},
    )
    assert refused.status == 403
    assert "access level" in await refused.text()
