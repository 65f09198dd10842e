"""Malformed JSON and wrong types never give a 5xx; unexpected errors hide their internals."""

from __future__ import annotations

import httpx
import pytest
from commerce_content.app import create_app
from commerce_content.settings import Settings
from servicekit.testing import serve_app
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.factories import bearer_for, make_user

BODIES = [b"{not json", b"[]", b'"text"', b"null", b'{"items": {"a": 1}}', b"\xff\xfe", b""]
ENDPOINTS = [
    "/api/v1/articles",
    "/api/orders/checkout",
    "/api/orders/webhook/stripe",
    "/api/contact",
    "/api/admin-action",
    "/api/content/products",
]


@pytest.mark.parametrize("path", ENDPOINTS)
@pytest.mark.parametrize("body", BODIES)
async def test_malformed_bodies_never_give_a_5xx(
    client: httpx.AsyncClient,
    db_engine: AsyncEngine,
    service_settings: Settings,
    path: str,
    body: bytes,
) -> None:
    admin = await make_user(db_engine, "admin")
    response = await client.post(
        path,
        content=body,
        headers={
            **bearer_for(service_settings, admin, "admin"),
            "content-type": "application/json",
        },
    )
    assert response.status_code < 500, (path, body, response.text)
    # The admin action takes any JSON; everything else refuses these bodies with an error.
    expected = "success" if response.status_code == 200 else "error"
    assert expected in response.json()


async def test_an_unexpected_error_is_a_500_in_the_envelope_without_internals(
    service_settings: Settings,
) -> None:
    app = create_app(service_settings)

    @app.get("/api/v1/explode")
    async def explode() -> None:
        raise RuntimeError("database password is hunter2")

    async with serve_app(app) as http:
        response = await http.get("/api/v1/explode")
    assert response.status_code == 500
    assert response.json() == {
        "error": {"code": "internal_error", "message": "Internal server error"}
    }
    assert "hunter2" not in response.text
