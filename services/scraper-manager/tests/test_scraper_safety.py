"""What a scraper may be configured with: no internal address in any spelling (the shared
address policy, at create and PATCH), no transport or metadata headers, follow patterns a
linear-time engine accepts, and a schedule that fires."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from scraper_manager.app import create_app
from scraper_manager.settings import Settings
from servicekit.testing import serve_app
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.factories import Client, make_client, scraper_body

BASE = "/api/v1/scrapers"

# Literals only (and `localhost`): nothing is sent anywhere by these tests.
INTERNAL_URLS = [
    "http://[::1]:8080/internal-admin",
    "http://127.0.0.1:9/",
    "http://localhost:9/",
    "http://169.254.169.254/latest/meta-data/iam/",
    "http://100.100.100.200/latest/meta-data/",
    "http://100.64.0.1/",
    "http://192.0.0.192/opc/v2/",
    "http://10.0.0.1/",
    "http://[fd00:ec2::254]/",
    "http://[2002:7f00:1::]/",
    "http://[2002:a9fe:a9fe::]/",
    "http://[64:ff9b::7f00:1]/",
    "http://[::ffff:127.0.0.1]/",
    "http://2130706433/",
    "http://0x7f.1/",
    "http://0177.0.0.1/",
]


@pytest.fixture
async def production(
    service_settings: Settings,
) -> AsyncIterator[httpx.AsyncClient]:
    """The API as production runs it: no network allowed beyond the public internet."""
    settings = service_settings.model_copy(update={"allowed_networks": []})
    async with serve_app(create_app(settings)) as http:
        yield http


async def created(http: httpx.AsyncClient, who: Client, **body: Any) -> dict[str, Any]:
    response = await http.post(BASE, json=scraper_body(**body), headers=who.headers)
    assert response.status_code == 201, response.text
    return dict(response.json())


@pytest.mark.parametrize("url", INTERNAL_URLS)
async def test_an_internal_start_url_is_refused_at_create(
    production: httpx.AsyncClient, db_engine: AsyncEngine, url: str
) -> None:
    who = await make_client(db_engine, "write")
    response = await production.post(BASE, json=scraper_body(url=url), headers=who.headers)
    assert response.status_code == 422, response.text
    assert response.json()["code"] == "address_not_allowed"


@pytest.mark.parametrize("url", ["http://[::1]:8080/internal-admin", "http://0x7f.1/"])
async def test_an_internal_start_url_is_refused_at_patch(
    production: httpx.AsyncClient, db_engine: AsyncEngine, url: str
) -> None:
    who = await make_client(db_engine, "write")
    scraper = await created(production, who, url="http://8.8.8.8/")
    response = await production.patch(
        f"{BASE}/{scraper['id']}", json={"url": url}, headers=who.headers
    )
    assert response.status_code == 422, response.text
    assert response.json()["code"] == "address_not_allowed"


@pytest.mark.parametrize("url", ["http://169.254.1.1/", "http://[fe80::1]/"])
async def test_a_link_local_start_url_is_refused_even_inside_an_allowed_network(
    service_settings: Settings, db_engine: AsyncEngine, url: str
) -> None:
    """Link-local is where cloud metadata services answer: never reached, whatever is allowed."""
    settings = service_settings.model_copy(
        update={"allowed_networks": ["169.254.0.0/16", "fe80::/10"]}
    )
    who = await make_client(db_engine, "write")
    async with serve_app(create_app(settings)) as http:
        response = await http.post(BASE, json=scraper_body(url=url), headers=who.headers)
    assert response.status_code == 422, response.text
    assert response.json()["code"] == "address_not_allowed"
    assert "link-local" in response.json()["error"]


async def test_a_public_start_url_is_accepted(
    production: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "write")
    await created(production, who, url="http://8.8.8.8/catalog")


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:99999/", "http://127.0.0.1:0/", "http://example.com:8x/"]
)
async def test_a_url_with_an_impossible_port_is_422_naming_the_field_at_create_and_patch(
    client: httpx.AsyncClient, db_engine: AsyncEngine, url: str
) -> None:
    who = await make_client(db_engine, "write")
    response = await client.post(BASE, json=scraper_body(url=url), headers=who.headers)
    assert response.status_code == 422, response.text
    assert response.json()["code"] == "validation_error"
    assert "url" in response.json()["error"]
    scraper = await created(client, who)
    patched = await client.patch(f"{BASE}/{scraper['id']}", json={"url": url}, headers=who.headers)
    assert patched.status_code == 422, patched.text
    assert "url" in patched.json()["error"]


async def test_a_webhook_url_with_an_impossible_port_is_422_naming_the_field(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "write")
    response = await client.post(
        "/api/v1/webhooks",
        json={"url": "http://127.0.0.1:99999/hooks", "events": ["run.completed"]},
        headers=who.headers,
    )
    assert response.status_code == 422, response.text
    assert "url" in response.json()["error"]


@pytest.mark.parametrize(
    "name",
    [
        "Host",
        "Metadata-Flavor",
        "X-aws-ec2-metadata-token",
        "X-aws-ec2-metadata-token-ttl-seconds",
        "Metadata",
        "Content-Length",
        "Transfer-Encoding",
        "Connection",
        "X-Forwarded-For",
    ],
)
async def test_transport_and_metadata_headers_are_refused(
    client: httpx.AsyncClient, db_engine: AsyncEngine, name: str
) -> None:
    who = await make_client(db_engine, "write")
    response = await client.post(BASE, json=scraper_body(headers={name: "x"}), headers=who.headers)
    assert response.status_code == 422, response.text
    scraper = await created(client, who)
    patched = await client.patch(
        f"{BASE}/{scraper['id']}", json={"headers": {name: "x"}}, headers=who.headers
    )
    assert patched.status_code == 422, patched.text


async def test_ordinary_headers_are_kept(client: httpx.AsyncClient, db_engine: AsyncEngine) -> None:
    who = await make_client(db_engine, "write")
    scraper = await created(client, who, headers={"Authorization": "Bearer x", "Cookie": "a=b"})
    assert scraper["headers"] == {"Authorization": "Bearer x", "Cookie": "a=b"}


async def created_and_patched_with(
    client: httpx.AsyncClient, who: Client, **field: str
) -> tuple[httpx.Response, httpx.Response]:
    """The answers to a scraper created with `field`, and to another, created without it,
    patched with it."""
    response = await client.post(BASE, json=scraper_body(**field), headers=who.headers)
    scraper = await created(client, who)
    patched = await client.patch(f"{BASE}/{scraper['id']}", json=field, headers=who.headers)
    return response, patched


@pytest.mark.parametrize("pattern", ["re:(a)\\1", "re:(?=a)b", "re:(?<!a)b", "re:a{1001}"])
async def test_follow_patterns_a_linear_time_engine_cannot_run_are_422(
    client: httpx.AsyncClient, db_engine: AsyncEngine, pattern: str
) -> None:
    who = await make_client(db_engine, "write")
    response, patched = await created_and_patched_with(client, who, follow=pattern)
    assert response.status_code == 422, response.text
    assert patched.status_code == 422, patched.text


async def test_the_pathological_pattern_of_the_report_is_accepted_as_linear(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "write")
    await created(client, who, follow="re:(a+)+$")


@pytest.mark.parametrize("schedule", ["0 0 31 2 *", "0 0 30 2 *", "0 0 31 4,6,9,11 *"])
async def test_a_schedule_that_never_fires_is_422_at_create_and_patch(
    client: httpx.AsyncClient, db_engine: AsyncEngine, schedule: str
) -> None:
    who = await make_client(db_engine, "write")
    response, patched = await created_and_patched_with(client, who, schedule=schedule)
    assert response.status_code == 422, response.text
    assert "never" in response.text
    assert patched.status_code == 422, patched.text


async def test_a_leap_day_schedule_fires_and_is_accepted(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "write")
    scraper = await created(client, who, schedule="0 0 29 2 *")
    assert scraper["next_run_at"] is not None


async def test_a_scraper_stored_under_older_rules_is_still_shown(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "write")
    scraper = await created(client, who)
    async with db_engine.begin() as conn:
        await conn.execute(
            text(
                "UPDATE scrapers SET follow = :f, headers = CAST(:h AS json), schedule = :s"
                " WHERE id = :id"
            ),
            {"f": "re:(a)\\1", "h": '{"Host": "x"}', "s": "0 0 31 2 *", "id": scraper["id"]},
        )
    shown = await client.get(f"{BASE}/{scraper['id']}", headers=who.headers)
    assert shown.status_code == 200, shown.text
    assert shown.json()["follow"] == "re:(a)\\1"
