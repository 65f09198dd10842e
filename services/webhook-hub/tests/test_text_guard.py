"""The probes of issue 13 (M1) against webhook-hub: text PostgreSQL cannot store is a 422 in the
envelope (the generic cases are in the conformance tests)."""

from __future__ import annotations

import httpx


async def test_a_nul_event_type_filter_is_422(
    client: httpx.AsyncClient, admin_key_headers: dict[str, str]
) -> None:
    response = await client.get("/webhooks/subscriptions?event_type=%00", headers=admin_key_headers)
    assert response.status_code == 422
    assert "NUL" in response.json()["error"]


async def test_a_nul_in_a_subscription_body_is_422_and_creates_nothing(
    client: httpx.AsyncClient, admin_key_headers: dict[str, str]
) -> None:
    response = await client.post(
        "/webhooks/subscriptions",
        content=b'{"endpoint_url": "https://example.com/\\u0000", "event_types": ["order.paid"]}',
        headers={**admin_key_headers, "Content-Type": "application/json"},
    )
    assert response.status_code == 422
    listed = await client.get("/webhooks/subscriptions", headers=admin_key_headers)
    assert listed.json()["data"] == []
