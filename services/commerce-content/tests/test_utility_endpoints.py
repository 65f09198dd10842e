"""Search, contact and the admin action (part B of the spec, without checkout)."""

from __future__ import annotations

import asyncio
import time
import uuid

import httpx
import pytest
from commerce_content.settings import Settings
from commerce_content.worker import run as run_worker
from servicekit.embedded.smtp import ReceivedMail, SmtpServer
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.factories import bearer_for, make_user


async def seed_search_data(engine: AsyncEngine, marker: str) -> None:
    async with engine.begin() as conn:
        for n in range(7):
            await conn.execute(
                text(
                    "INSERT INTO posts (title, slug, description, body, published, created_at)"
                    " VALUES (:t, :s, :d, '', true, now())"
                ),
                {"t": f"{marker} post {n}", "s": f"{marker}-post-{n}", "d": "about things"},
            )
        await conn.execute(
            text(
                "INSERT INTO pages (title, slug, description, body, published, created_at)"
                " VALUES ('About us', :s, :d, '', true, now())"
            ),
            {"s": f"{marker}-page", "d": f"the {marker} team"},
        )
        await conn.execute(
            text(
                "INSERT INTO products (name, slug, description, base_price, currency, stock, image,"
                " tags, parent_id, menu_index, published, deleted, created_at, updated_at)"
                " VALUES (:n, :s, 'a product', 9.99, 'USD', 3, '', '{}', 1, 0, true, false, now(), now())"
            ),
            {"n": f"{marker} mug", "s": f"{marker}-mug"},
        )
        await conn.execute(
            text(
                "INSERT INTO posts (title, slug, description, body, published, created_at)"
                " VALUES (:t, :s, '', '', false, now())"
            ),
            {"t": f"{marker} unpublished", "s": f"{marker}-hidden"},
        )


async def test_search_finds_at_most_5_per_collection_and_names_each(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    marker = f"zq{uuid.uuid4().hex[:6]}"
    await seed_search_data(db_engine, marker)
    body = (await client.get(f"/api/search?q={marker.upper()}")).json()
    collections = [doc["_collection"] for doc in body["docs"]]
    assert collections.count("posts") == 5
    assert collections.count("pages") == 1
    assert collections.count("products") == 1
    assert body["totalDocs"] == len(body["docs"]) == 7
    assert all("unpublished" not in doc["title"] for doc in body["docs"])


async def test_search_by_type_limits_the_collection(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    marker = f"zq{uuid.uuid4().hex[:6]}"
    await seed_search_data(db_engine, marker)
    body = (await client.get(f"/api/search?q={marker}&type=products")).json()
    assert [doc["_collection"] for doc in body["docs"]] == ["products"]
    assert body["docs"][0]["title"] == f"{marker} mug"


@pytest.mark.parametrize("query", ["", "?q=", "?q=a", "?q=%20x%20"])
async def test_short_queries_find_nothing(client: httpx.AsyncClient, query: str) -> None:
    response = await client.get(f"/api/search{query}")
    assert response.json() == {"docs": [], "totalDocs": 0}


async def test_like_wildcards_in_the_query_are_taken_literally(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    marker = f"zq{uuid.uuid4().hex[:6]}"
    await seed_search_data(db_engine, marker)
    assert (await client.get("/api/search?q=%25%25")).json()["totalDocs"] == 0
    assert (await client.get("/api/search?q=__")).json()["totalDocs"] == 0
    async with db_engine.begin() as conn:
        await conn.execute(
            text(
                "INSERT INTO posts (title, slug, description, body, published, created_at)"
                " VALUES ('100% cotton_shirt', :s, '', '', true, now())"
            ),
            {"s": f"{marker}-pct"},
        )
    found = (await client.get("/api/search?q=0%25%20cotton_")).json()
    assert [doc["title"] for doc in found["docs"]] == ["100% cotton_shirt"]


async def test_an_unknown_type_is_400(client: httpx.AsyncClient) -> None:
    response = await client.get("/api/search?q=abc&type=users")
    assert response.status_code == 400
    assert set(response.json()) == {"error"}


async def test_contact_saves_a_new_inquiry_and_publishes_an_event(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    email = f"{uuid.uuid4().hex[:8]}@example.com"
    response = await client.post(
        "/api/contact", json={"name": "Ada", "email": email, "message": "Hello there"}
    )
    assert response.status_code == 200
    assert response.json() == {"success": True}
    async with db_engine.connect() as conn:
        row = (
            await conn.execute(
                text("SELECT id, status FROM inquiries WHERE email = :e"), {"e": email}
            )
        ).one()
        event = await conn.scalar(
            text("SELECT type FROM outbox_events WHERE data->>'email' = :e"), {"e": email}
        )
    assert row.status == "new"
    assert event == "inquiry.created"


@pytest.mark.parametrize(
    "body",
    [
        {"email": "a@example.com", "message": "hi"},
        {"name": "Ada", "message": "hi"},
        {"name": "Ada", "email": "a@example.com"},
        {"name": "  ", "email": "a@example.com", "message": "hi"},
        {"name": 5, "email": "a@example.com", "message": "hi"},
        {"name": "Ada", "email": "not-an-address", "message": "hi"},
    ],
)
async def test_contact_refuses_missing_fields_and_bad_addresses(
    client: httpx.AsyncClient, body: dict[str, object]
) -> None:
    response = await client.post("/api/contact", json=body)
    assert response.status_code == 400
    assert isinstance(response.json()["error"], str)


@pytest.mark.parametrize(
    "body",
    [
        {"name": "a\r\nBcc: x@example.com", "email": "a@example.com", "message": "hi"},
        {"name": "a\nb", "email": "a@example.com", "message": "hi"},
        {"name": "a\x00b", "email": "a@example.com", "message": "hi"},
        {"name": "a\x1bb", "email": "a@example.com", "message": "hi"},
        {"name": "a\u2028b", "email": "a@example.com", "message": "hi"},
        {"name": "Ada", "email": "a@example.com\r\nBcc: x@example.com", "message": "hi"},
        {"name": "Ada", "email": "a@example.com", "message": "hi\x00"},
    ],
)
async def test_contact_refuses_line_breaks_and_control_characters_in_name_and_email(
    client: httpx.AsyncClient, db_engine: AsyncEngine, body: dict[str, object]
) -> None:
    response = await client.post("/api/contact", json=body)
    assert response.status_code == 400
    assert set(response.json()) == {"error"}
    # NUL is refused for every field by the servicekit input guard, in its own words.
    error = response.json()["error"]
    assert "control characters" in error or "NUL character" in error


async def test_contact_keeps_line_breaks_in_the_message(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/api/contact",
        json={"name": "Ada", "email": "ada@example.com", "message": "Hello,\r\n\tthere"},
    )
    assert response.status_code == 200


async def test_contact_refuses_a_body_that_is_not_json(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/api/contact", content=b"name=Ada", headers={"content-type": "application/json"}
    )
    assert response.status_code == 400


def mail_about(smtp_server: SmtpServer, name: str, timeout: float = 20.0) -> list[ReceivedMail]:
    """The inquiry mail about `name`, once it has arrived (other tests' mail may come first)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        mine = [m for m in smtp_server.received if name in m.subject]
        if mine:
            return mine
        time.sleep(0.05)
    raise TimeoutError(f"no mail about {name}")


async def test_contact_mail_reaches_the_administrators(
    service_settings: Settings, client: httpx.AsyncClient, smtp_server: SmtpServer
) -> None:
    settings = service_settings.model_copy(
        update={"smtp_url": smtp_server.url, "admin_emails": ["owner@shop.example"]}
    )
    stop = asyncio.Event()
    worker = asyncio.create_task(run_worker(settings, stop))
    try:
        from commerce_content.app import create_app
        from servicekit.testing import serve_app

        async with serve_app(create_app(settings)) as http:
            await http.post(
                "/api/contact",
                json={"name": "Grace", "email": "grace@example.com", "message": "Ship to Oslo?"},
            )
        mine = await asyncio.to_thread(mail_about, smtp_server, "Grace")
    finally:
        stop.set()
        await asyncio.wait_for(worker, 30)
    assert mine[0].recipients == ("owner@shop.example",)
    assert "Ship to Oslo?" in mine[0].text


async def test_admin_action_without_a_user_is_401(client: httpx.AsyncClient) -> None:
    for headers in ({}, {"Authorization": "Bearer not.a.jwt"}, {"Authorization": "Basic abc"}):
        response = await client.post("/api/admin-action", json={"action": "x"}, headers=headers)
        assert response.status_code == 401
        assert response.json() == {"error": "Unauthorized"}


async def test_admin_action_by_a_non_admin_is_403(
    client: httpx.AsyncClient, db_engine: AsyncEngine, service_settings: Settings
) -> None:
    manager = await make_user(db_engine, "manager")
    response = await client.post(
        "/api/admin-action",
        json={"action": "x"},
        headers=bearer_for(service_settings, manager, "manager"),
    )
    assert response.status_code == 403
    assert response.json() == {"error": "Forbidden"}


async def test_admin_action_by_an_admin_writes_the_audit_row(
    client: httpx.AsyncClient, db_engine: AsyncEngine, service_settings: Settings
) -> None:
    admin = await make_user(db_engine, "admin")
    body = {"action": f"reindex-{uuid.uuid4().hex[:6]}", "scope": ["products"]}
    response = await client.post(
        "/api/admin-action", json=body, headers=bearer_for(service_settings, admin, "admin")
    )
    assert response.status_code == 200
    assert response.json() == {"success": True}
    async with db_engine.connect() as conn:
        row = (
            await conn.execute(
                text("SELECT action, user_id, timestamp, data FROM audit_logs WHERE action = :a"),
                {"a": body["action"]},
            )
        ).one()
    assert row.user_id == str(admin)
    assert row.data == body
    from datetime import datetime

    assert datetime.fromisoformat(row.timestamp).tzinfo is not None


@pytest.mark.parametrize("number", ["1e400", "-1e400", "NaN", "Infinity"])
async def test_admin_action_with_a_number_no_float_holds_is_400_and_writes_nothing(
    client: httpx.AsyncClient, db_engine: AsyncEngine, service_settings: Settings, number: str
) -> None:
    """Read as `inf`, the number reached PostgreSQL's json column: a 500 before."""
    admin = await make_user(db_engine, "admin")
    action = f"limit-{uuid.uuid4().hex[:6]}"
    response = await client.post(
        "/api/admin-action",
        content=f'{{"action": "{action}", "limit": {number}}}',
        headers={
            **bearer_for(service_settings, admin, "admin"),
            "Content-Type": "application/json",
        },
    )
    assert response.status_code == 400, response.text
    assert response.json() == {
        "error": f"body.limit is a number outside the range of a 64-bit float ({number})"
    }
    async with db_engine.connect() as conn:
        rows = await conn.execute(text("SELECT 1 FROM audit_logs WHERE action = :a"), {"a": action})
        assert rows.first() is None
