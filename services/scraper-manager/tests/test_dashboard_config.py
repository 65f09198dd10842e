"""The scraper form says what to scrape as the API does: the item selector, the fields, the
links to follow, depth, robots.txt, concurrency, timeout and runs kept, validated by the API's
own `ScraperConfig`/`ScraperPatch` with each refusal at its field; a scraper's page shows them."""

from __future__ import annotations

import re

import httpx
from scraper_manager.dashboard.forms import NEW_FORM, parse_selectors, read_form
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.dashboard import DASH, new_scraper_form, sign_in, signed_in_as_new
from tests.factories import make_client, make_scraper

WHAT_TO_SCRAPE = {
    "name": "shop",
    "url": "http://127.0.0.1:9/catalog",
    "timezone": "UTC",
    "item_selector": "div.product",
    "selectors": "name: h2::text\nprice: span.price::text\nlink: a::attr(href)",
    "follow": "a.next",
    "max_depth": "3",
    "obey_robots": "",  # unticked: sent as nothing
    "concurrency": "8",
    "timeout_seconds": "15",
    "keep_runs": "5",
}


def test_a_fields_line_is_split_at_its_first_colon_so_the_expression_keeps_its_own() -> None:
    assert parse_selectors("price: span.price::text\n\n link : a::attr(href) ") == (
        {"price": "span.price::text", "link": "a::attr(href)"},
        None,
    )


def test_a_fields_line_without_a_name_or_an_expression_is_an_error_naming_the_line() -> None:
    assert parse_selectors("name: h2::text\nprice")[1] == (
        "Line 2: write each field as name: CSS or XPath"
    )
    assert parse_selectors("name:")[1] == "Line 1: write each field as name: CSS or XPath"


def test_a_field_named_twice_is_an_error_not_a_silent_overwrite() -> None:
    assert parse_selectors("name: h2\nname: h3")[1] == "Line 2: the field 'name' is named twice"


def test_the_form_reads_every_field_the_api_takes_into_its_config() -> None:
    form = read_form(WHAT_TO_SCRAPE)
    assert form.errors == {}
    assert form.config is not None
    assert form.config.model_dump(
        include={
            "item_selector",
            "selectors",
            "follow",
            "max_depth",
            "obey_robots",
            "concurrency",
            "timeout_seconds",
            "keep_runs",
        }
    ) == {
        "item_selector": "div.product",
        "selectors": {"name": "h2::text", "price": "span.price::text", "link": "a::attr(href)"},
        "follow": "a.next",
        "max_depth": 3,
        "obey_robots": False,
        "concurrency": 8,
        "timeout_seconds": 15,
        "keep_runs": 5,
    }


def test_the_apis_refusals_are_keyed_by_the_field_they_belong_to() -> None:
    form = read_form(
        {
            **WHAT_TO_SCRAPE,
            "item_selector": "div[",
            "selectors": "price: span[[",
            "follow": "re:(a)\\1",
            "max_depth": "101",
            "concurrency": "0",
            "timeout_seconds": "many",
        }
    )
    assert form.config is None
    assert "'div[' is not a valid CSS or XPath expression" in form.errors["item_selector"]
    assert "'span[[' is not a valid CSS or XPath expression" in form.errors["selectors"]
    assert "RE2" in form.errors["follow"]
    assert "less than or equal to 100" in form.errors["max_depth"]
    assert "greater than or equal to 1" in form.errors["concurrency"]
    assert "valid integer" in form.errors["timeout_seconds"]


def test_the_form_reads_the_item_key_and_revalidate() -> None:
    form = read_form({**WHAT_TO_SCRAPE, "item_key": " name ", "revalidate": "on"})
    assert form.config is not None
    assert (form.config.item_key, form.config.revalidate) == ("name", True)


def test_an_empty_item_key_is_none_and_an_unticked_revalidate_is_false() -> None:
    # An unticked checkbox sends nothing.
    form = read_form({**WHAT_TO_SCRAPE, "item_key": ""})
    assert form.config is not None
    assert (form.config.item_key, form.config.revalidate) == (None, False)


def test_a_new_scraper_form_revalidates_by_default_as_the_api_does() -> None:
    assert NEW_FORM["revalidate"] == "on"
    assert NEW_FORM["item_key"] == ""


async def test_a_scraper_made_with_the_form_has_what_to_scrape_and_its_page_shows_it(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who, token = await signed_in_as_new(client, db_engine, "write")
    answer = await new_scraper_form(client, token, {**WHAT_TO_SCRAPE})
    assert answer.status_code == 303, answer.text
    made = (await client.get("/api/v1/scrapers", headers=who.headers)).json()["data"][0]
    assert (made["item_selector"], made["follow"], made["max_depth"]) == (
        "div.product",
        "a.next",
        3,
    )
    assert made["selectors"] == {
        "name": "h2::text",
        "price": "span.price::text",
        "link": "a::attr(href)",
    }
    assert (made["obey_robots"], made["concurrency"], made["timeout_seconds"]) == (False, 8, 15)
    assert made["keep_runs"] == 5
    page = (await client.get(answer.headers["location"])).text
    assert "each <code>div.product</code>" in page
    assert "<li>price: <code>span.price::text</code></li>" in page
    assert "<code>a.next</code>" in page
    assert "<dt>Max depth</dt><dd>3</dd>" in page
    assert "<dt>robots.txt</dt><dd>ignored</dd>" in page
    assert "8 at a time, 15 s timeout" in page


async def test_a_bad_field_expression_is_shown_at_the_fields_box_and_nothing_is_made(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who, token = await signed_in_as_new(client, db_engine, "write")
    answer = await new_scraper_form(client, token, {**WHAT_TO_SCRAPE, "selectors": "price: span[["})
    assert answer.status_code == 422
    assert re.search(
        r'id="f-selectors-error">[^<]*&#39;span\[\[&#39; is not a valid CSS or XPath', answer.text
    )
    assert 'aria-describedby="f-selectors-hint f-selectors-error"' in answer.text
    assert ">price: span[[</textarea>" in answer.text  # what was typed stays
    # And at the top, linked to the field: a long form hides its lower fields.
    assert '<li><a href="#f-selectors">Fields</a>: &#39;span[[&#39; is not' in answer.text
    assert (await client.get("/api/v1/scrapers", headers=who.headers)).json()["data"] == []


async def test_the_edit_form_shows_what_is_stored_and_saving_it_unchanged_changes_nothing(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "write")
    scraper = await make_scraper(
        db_engine,
        who.owner,
        item_selector="li.row",
        selectors={"title": "h3::text", "when": "time::attr(datetime)"},
        follow="re:/page/\\d+$",
        max_depth=2,
        obey_robots=False,
        concurrency=2,
        keep_runs=9,
    )
    token = await sign_in(client, who)
    before = (await client.get(f"/api/v1/scrapers/{scraper.id}", headers=who.headers)).json()
    form = (await client.get(f"{DASH}/scrapers/{scraper.id}/edit")).text
    # As stored (JSONB orders an object's keys shorter first).
    assert ">when: time::attr(datetime)\ntitle: h3::text</textarea>" in form
    assert 'name="obey_robots" value="on"' in form
    assert 'name="obey_robots" value="on" checked' not in form
    assert 'name="revalidate" value="on" checked' in form
    shown = dict(re.findall(r'<input id="f-(\w+)" name="\w+" type="\w+" value="([^"]*)"', form))
    fields = {
        "name": shown["name"],
        "url": shown["url"],
        "timezone": shown["timezone"],
        "rate_limit": shown["rate_limit"],
        "max_pages": shown["max_pages"],
        "item_selector": shown["item_selector"],
        "selectors": "when: time::attr(datetime)\ntitle: h3::text",
        "follow": shown["follow"].replace("&#92;", "\\"),
        "max_depth": shown["max_depth"],
        "concurrency": shown["concurrency"],
        "timeout_seconds": shown["timeout_seconds"],
        "keep_runs": shown["keep_runs"],
        "item_key": shown["item_key"],
        "revalidate": "on",  # ticked, as the form shows it
    }
    saved = await client.post(
        f"{DASH}/scrapers/{scraper.id}/edit", data={**fields, "csrf_token": token}
    )
    assert saved.status_code == 303, saved.text
    after = (await client.get(f"/api/v1/scrapers/{scraper.id}", headers=who.headers)).json()
    assert {k: v for k, v in after.items() if k != "updated_at"} == {
        k: v for k, v in before.items() if k != "updated_at"
    }
