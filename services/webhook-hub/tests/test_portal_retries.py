"""The portal's retry schedule and timeout editor (an endpoint's, and the owner's defaults):
what it shows in effect and where from, what it saves, and each refused wait at its row."""

from __future__ import annotations

import re
from typing import Any

import httpx
from servicekit.testing import HttpReceiver
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.factories import (
    make_consumer,
    signed_in,
    signed_in_as_new,
    signed_in_with_endpoint,
    subscribe,
)

DEFAULTS = "/webhooks/consumers/me/defaults"


def field_errors(page: str) -> dict[str, str]:
    return dict(re.findall(r'<p class="error-text" id="f-([a-z_0-9-]+)-error">([^<]+)</p>', page))


def in_effect(page: str) -> str:
    """The text of the "in effect" facts, tags removed."""
    found = re.search(r'<dl class="facts" id="retries-in-effect">(.*?)</dl>', page, re.S)
    assert found is not None
    return " ".join(re.sub(r"<[^>]+>", " ", found.group(1)).split())


def retry_form(token: str, *waits: str, own: bool = True, timeout: str = "") -> dict[str, Any]:
    return {
        "csrf_token": token,
        "schedule": "own" if own else "follow",
        "wait": list(waits),
        "timeout_seconds": timeout,
    }


async def test_the_endpoint_page_shows_the_service_defaults_in_effect_and_says_so(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    _, created, _ = await signed_in_with_endpoint(client, db_engine, http_receiver.url)
    page = (await client.get(f"/portal/endpoints/{created['id']}")).text
    shown = in_effect(page)
    assert "5s · 5m · 30m · 2h · 5h · 10h · 10h" in shown
    assert "(service default; 8 attempts at most, the last 1d 3h 35m 5s after the first)" in shown
    assert "10 s (service default)" in shown


async def test_the_endpoint_page_says_which_values_come_from_the_owners_defaults(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer, created, _ = await signed_in_with_endpoint(
        client, db_engine, http_receiver.url, timeout_seconds=4
    )
    await client.put(DEFAULTS, json={"retry_schedule": ["1m", "1h"]}, headers=consumer.headers)
    page = (await client.get(f"/portal/endpoints/{created['id']}")).text
    shown = in_effect(page)
    assert "1m · 1h (from your defaults; 3 attempts at most, the last 1h 1m after the first)" in (
        shown
    )
    assert "4 s (set on this endpoint)" in shown
    assert "Use your defaults" in page


async def test_saving_waits_and_a_timeout_sets_them_on_the_endpoint(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer, created, token = await signed_in_with_endpoint(client, db_engine, http_receiver.url)
    # Empty rows between waits are skipped.
    form = retry_form(token, "30s", "", "5m", "", timeout="12")
    response = await client.post(f"/portal/endpoints/{created['id']}/retries", data=form)
    assert response.status_code == 303
    saved = await client.get(f"/webhooks/subscriptions/{created['id']}", headers=consumer.headers)
    assert (saved.json()["retry_schedule"], saved.json()["timeout_seconds"]) == (["30s", "5m"], 12)
    page = (await client.get(f"/portal/endpoints/{created['id']}")).text
    assert "Retries and timeout saved." in page
    assert 'name="wait" value="30s"' in page


async def test_choosing_the_defaults_again_unsets_the_endpoints_own(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer, created, token = await signed_in_with_endpoint(
        client, db_engine, http_receiver.url, retry_schedule=["1m"], timeout_seconds=5
    )
    response = await client.post(
        f"/portal/endpoints/{created['id']}/retries", data=retry_form(token, own=False)
    )
    assert response.status_code == 303
    saved = (
        await client.get(f"/webhooks/subscriptions/{created['id']}", headers=consumer.headers)
    ).json()
    assert saved["retry_schedule"] is None
    assert saved["in_effect"]["timeout_seconds_from"] == "service_default"


async def test_each_bad_wait_is_told_at_its_own_row_and_the_form_comes_back_as_typed(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer, created, token = await signed_in_with_endpoint(
        client, db_engine, http_receiver.url, retry_schedule=["1m"]
    )
    form = retry_form(token, "30s", "", "soon", timeout="99")
    response = await client.post(f"/portal/endpoints/{created['id']}/retries", data=form)
    assert response.status_code == 422
    errors = field_errors(response.text)
    # The third row (the empty second one is skipped, not renumbered).
    assert set(errors) == {"wait-3", "timeout_seconds"}
    assert "&#39;soon&#39; is not a duration" in errors["wait-3"]
    assert 'id="f-wait-3" name="wait" value="soon"' in response.text
    saved = await client.get(f"/webhooks/subscriptions/{created['id']}", headers=consumer.headers)
    assert saved.json()["retry_schedule"] == ["1m"]


async def test_a_schedule_past_seven_days_is_told_for_the_whole_schedule(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    _, created, token = await signed_in_with_endpoint(client, db_engine, http_receiver.url)
    form = retry_form(token, "4d", "4d")
    response = await client.post(f"/portal/endpoints/{created['id']}/retries", data=form)
    assert response.status_code == 422
    assert "at most 7 days" in field_errors(response.text)["retry_schedule"]


async def test_waits_typed_while_following_the_defaults_are_told_not_dropped(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    _, created, token = await signed_in_with_endpoint(client, db_engine, http_receiver.url)
    form = retry_form(token, "30s", own=False)
    response = await client.post(f"/portal/endpoints/{created['id']}/retries", data=form)
    assert response.status_code == 422
    assert "Set these waits" in field_errors(response.text)["retry_schedule"]


async def test_another_owners_endpoint_editor_is_404(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    owner = await make_consumer(db_engine, "write")
    theirs = await subscribe(client, owner.headers, http_receiver.url, retry_schedule=["1m"])
    _, token = await signed_in_as_new(client, db_engine)
    url = f"/portal/endpoints/{theirs['id']}/retries"
    assert (await client.get(url)).status_code == 404
    assert (await client.post(url, data=retry_form(token, "1s"))).status_code == 404
    saved = await client.get(f"/webhooks/subscriptions/{theirs['id']}", headers=owner.headers)
    assert saved.json()["retry_schedule"] == ["1m"]


async def test_a_reader_sees_the_values_in_effect_but_no_editor_and_cannot_save(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    writer = await make_consumer(db_engine, "write")
    created = await subscribe(client, writer.headers, http_receiver.url)
    reader = await make_consumer(db_engine, "read", owner=writer.owner)
    token = await signed_in(client, reader)
    page = (await client.get(f"/portal/endpoints/{created['id']}")).text
    assert 'id="retries-in-effect"' in page
    assert "Save retries and timeout" not in page
    response = await client.post(
        f"/portal/endpoints/{created['id']}/retries", data=retry_form(token, "1s")
    )
    assert response.status_code == 403


async def test_the_defaults_page_saves_the_owners_defaults_which_endpoints_then_follow(
    client: httpx.AsyncClient, db_engine: AsyncEngine, http_receiver: HttpReceiver
) -> None:
    consumer, created, token = await signed_in_with_endpoint(client, db_engine, http_receiver.url)
    page = await client.get("/portal/defaults")
    assert page.status_code == 200
    assert "service default" in in_effect(page.text)
    response = await client.post(
        "/portal/defaults", data=retry_form(token, "2m", "2h", timeout="8")
    )
    assert response.status_code == 303
    defaults = (await client.get(DEFAULTS, headers=consumer.headers)).json()
    assert (defaults["retry_schedule"], defaults["timeout_seconds"]) == (["2m", "2h"], 8)
    endpoint = (await client.get(f"/portal/endpoints/{created['id']}")).text
    assert "2m · 2h (from your defaults;" in in_effect(endpoint)
    assert "8 s (from your defaults)" in in_effect(endpoint)


async def test_the_defaults_page_tells_a_bad_wait_at_its_row(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    consumer, token = await signed_in_as_new(client, db_engine)
    response = await client.post("/portal/defaults", data=retry_form(token, "1m", "0s"))
    assert response.status_code == 422
    assert field_errors(response.text) == {"wait-2": "A wait must be longer than 0s"}
    assert (await client.get(DEFAULTS, headers=consumer.headers)).json()["retry_schedule"] is None
