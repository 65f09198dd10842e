"""/api/v1/scrapers: configuration, capacity, one run at a time, stop, status view."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from scraper_manager.app import create_app
from scraper_manager.settings import Settings
from servicekit.testing import serve_app
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.factories import Client, make_client, scraper_body

BASE = "/api/v1/scrapers"


async def create(client: httpx.AsyncClient, who: Client, **body: Any) -> dict[str, Any]:
    response = await client.post(BASE, json=scraper_body(**body), headers=who.headers)
    assert response.status_code == 201, response.text
    return dict(response.json())


async def test_create_answers_201_with_the_defaults(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "write")
    body = await create(client, who)
    assert body["rate_limit"] == 5
    assert body["headers"] == {}
    assert body["schedule"] is None
    assert body["proxy_pool"] is None
    assert body["status"] == "idle"
    assert body["max_pages"] == 100
    assert body["obey_robots"] is True
    assert isinstance(body["id"], int)


async def test_a_schedule_is_validated_and_registered(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "write")
    bad = await client.post(BASE, json=scraper_body(schedule="every day"), headers=who.headers)
    assert bad.status_code == 422
    good = await create(client, who, schedule="0 6 * * *", timezone="Europe/Oslo")
    assert good["next_run_at"] is not None
    patched = await client.patch(
        f"{BASE}/{good['id']}", json={"schedule": None}, headers=who.headers
    )
    assert patched.json()["next_run_at"] is None


@pytest.mark.parametrize(
    "body",
    [
        {"url": "ftp://example.com"},
        {"timezone": "Mars/Olympus"},
        {"rate_limit": 0},
        {"max_pages": 10_001},
        {"concurrency": 0},
        {"selectors": {"title": "h1[[["}},
        {"item_selector": "//div[@"},
        {"follow": "re:(unclosed"},
        {"headers": {"Bad Header": "x"}},
        {"unknown": True},
        {"name": ""},
    ],
)
async def test_invalid_configuration_is_422(
    client: httpx.AsyncClient, db_engine: AsyncEngine, body: dict[str, Any]
) -> None:
    who = await make_client(db_engine, "write")
    response = await client.post(BASE, json=scraper_body(**body), headers=who.headers)
    assert response.status_code == 422
    assert set(response.json()) >= {"error", "code"}


async def test_an_unknown_proxy_pool_is_422(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "write")
    response = await client.post(BASE, json=scraper_body(proxy_pool="nowhere"), headers=who.headers)
    assert response.status_code == 422
    assert response.json()["code"] == "unknown_proxy_pool"


async def test_the_51st_scraper_is_refused(
    service_settings: Settings, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "write")
    settings = service_settings.model_copy(update={"max_scrapers_per_client": 3})
    async with serve_app(create_app(settings)) as http:
        for _ in range(3):
            await create(http, who)
        response = await http.post(BASE, json=scraper_body(), headers=who.headers)
    assert response.status_code == 409
    assert response.json()["code"] == "scraper_limit_reached"


async def test_ids_beyond_the_database_range_are_422_and_forged_cursors_400(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    owner = await make_client(db_engine, "admin")
    huge = 2**31
    for method, path in (
        ("GET", f"{BASE}/{huge}"),
        ("DELETE", f"{BASE}/{huge}"),
        ("POST", f"{BASE}/{huge}/run"),
        ("GET", f"{BASE}/1/runs/{huge}"),
        ("GET", f"{BASE}/1/results?run_id={huge}"),
    ):
        response = await client.request(method, path, headers=owner.headers)
        assert response.status_code == 422, (method, path, response.text)
    scraper = await create(client, owner)
    for path in (
        f"{BASE}?cursor={huge}",
        f"{BASE}?cursor=abc",
        f"{BASE}/{scraper['id']}/runs?cursor={huge}",
    ):
        response = await client.get(path, headers=owner.headers)
        assert response.status_code == 400, (path, response.text)


async def test_unknown_ids_are_404_and_other_clients_ids_too(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    owner = await make_client(db_engine, "admin")
    stranger = await make_client(db_engine, "admin")
    scraper = await create(client, owner)
    for path in (f"{BASE}/999999", f"{BASE}/{scraper['id']}"):
        for method, suffix in (
            ("GET", ""),
            ("PATCH", ""),
            ("DELETE", ""),
            ("POST", "/run"),
            ("POST", "/stop"),
            ("GET", "/status"),
        ):
            response = await client.request(
                method,
                path + suffix,
                json={} if method == "PATCH" else None,
                headers=stranger.headers,
            )
            assert response.status_code == 404, (method, path + suffix)
    assert (await client.get(BASE, headers=stranger.headers)).json()["data"] == []


async def test_status_view_of_a_scraper_without_runs_is_idle(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "read", owner=None)
    writer = await make_client(db_engine, "write", owner=who.owner)
    scraper = await create(client, writer)
    view = (await client.get(f"{BASE}/{scraper['id']}/status", headers=who.headers)).json()
    assert view == {"id": scraper["id"], "status": "idle", "last_run": None, "items_count": 0}


async def test_run_creates_a_pending_run_and_a_second_run_is_409(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "write")
    scraper = await create(client, who)
    started = await client.post(f"{BASE}/{scraper['id']}/run", headers=who.headers)
    assert started.status_code == 202
    assert started.json()["status"] == "started"
    assert isinstance(started.json()["run_id"], int)
    again = await client.post(f"{BASE}/{scraper['id']}/run", headers=who.headers)
    assert again.status_code == 409
    assert "already running" in again.json()["error"]
    view = (await client.get(f"{BASE}/{scraper['id']}/status", headers=who.headers)).json()
    assert view["status"] == "pending"


async def test_stopping_a_pending_run_stops_it_before_it_starts(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "write")
    scraper = await create(client, who)
    run_id = (await client.post(f"{BASE}/{scraper['id']}/run", headers=who.headers)).json()[
        "run_id"
    ]
    stopped = await client.post(f"{BASE}/{scraper['id']}/stop", headers=who.headers)
    assert stopped.status_code == 202
    assert stopped.json() == {"run_id": run_id, "status": "stopped"}
    view = (await client.get(f"{BASE}/{scraper['id']}/status", headers=who.headers)).json()
    assert view["status"] == "stopped"
    assert (
        await client.post(f"{BASE}/{scraper['id']}/run", headers=who.headers)
    ).status_code == 202


async def test_stopping_a_scraper_that_is_not_running_is_409(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "write")
    scraper = await create(client, who)
    response = await client.post(f"{BASE}/{scraper['id']}/stop", headers=who.headers)
    assert response.status_code == 409
    assert response.json()["code"] == "not_running"


async def test_levels_read_write_admin(client: httpx.AsyncClient, db_engine: AsyncEngine) -> None:
    reader = await make_client(db_engine, "read")
    writer = await make_client(db_engine, "write", owner=reader.owner)
    assert (await client.post(BASE, json=scraper_body(), headers=reader.headers)).status_code == 403
    scraper = await create(client, writer)
    assert (await client.get(f"{BASE}/{scraper['id']}", headers=reader.headers)).status_code == 200
    assert (
        await client.delete(f"{BASE}/{scraper['id']}", headers=writer.headers)
    ).status_code == 403
    admin = await make_client(db_engine, "admin", owner=reader.owner)
    assert (
        await client.delete(f"{BASE}/{scraper['id']}", headers=admin.headers)
    ).status_code == 204


async def test_list_pages_with_a_cursor_and_filters_by_status(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "write")
    ids = [(await create(client, who))["id"] for _ in range(5)]
    await client.post(f"{BASE}/{ids[0]}/run", headers=who.headers)
    first = (await client.get(f"{BASE}?limit=2", headers=who.headers)).json()
    seen = [s["id"] for s in first["data"]]
    cursor = first["next_cursor"]
    while cursor:
        page = (await client.get(f"{BASE}?limit=2&cursor={cursor}", headers=who.headers)).json()
        seen += [s["id"] for s in page["data"]]
        cursor = page["next_cursor"]
    assert seen == ids[::-1]
    pending = (await client.get(f"{BASE}?status=pending", headers=who.headers)).json()["data"]
    assert [s["id"] for s in pending] == [ids[0]]
    idle = (await client.get(f"{BASE}?status=idle", headers=who.headers)).json()["data"]
    assert len(idle) == 4
