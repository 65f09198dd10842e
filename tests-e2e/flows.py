"""What the flows do through the services' public interfaces."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
from conftest import ServiceInfo


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def subscribe(
    http: httpx.AsyncClient, hub: ServiceInfo, url: str, events: list[str], key: str | None = None
) -> dict[str, Any]:
    response = await http.post(
        f"{hub.url}/webhooks/subscriptions",
        json={"endpoint_url": url, "events": events},
        headers=bearer(key or hub.admin_key),
    )
    assert response.status_code == 201, response.text
    return dict(response.json())


async def catalogue(
    http: httpx.AsyncClient, shop: ServiceInfo, content_key: str
) -> list[dict[str, Any]]:
    response = await http.get(
        f"{shop.url}/api/products/", params={"limit": 100}, headers={"X-API-Key": content_key}
    )
    assert response.status_code == 200, response.text
    return list(response.json()["items"])


async def stocked_product(http: httpx.AsyncClient, shop: ServiceInfo, stock: int) -> dict[str, Any]:
    """A published product of its own for a test that buys: stock is taken at checkout, so
    tests sharing the demo catalogue would sell each other's items out."""
    manager = shop.cli("tokens", "create", "--sub", "2", "--role", "manager")
    slug = f"e2e-{uuid.uuid4().hex[:10]}"
    response = await http.post(
        f"{shop.url}/api/content/products",
        json={"name": slug, "slug": slug, "base_price": "9.50", "stock": stock, "published": True},
        headers=bearer(manager),
    )
    assert response.status_code == 201, response.text
    return dict(response.json())


async def register_event_type(http: httpx.AsyncClient, hub: ServiceInfo, name: str) -> None:
    """A consumer's own event type: its admin key submits events of the types it registered."""
    response = await http.post(
        f"{hub.url}/webhooks/event-types",
        json={"name": name, "description": "e2e producer events"},
        headers=bearer(hub.admin_key),
    )
    assert response.status_code == 201, response.text


async def checkout(
    http: httpx.AsyncClient, shop: ServiceInfo, product_id: int, email: str
) -> dict[str, Any]:
    response = await http.post(
        f"{shop.url}/api/orders/checkout",
        json={"items": [{"productId": str(product_id), "quantity": 1}], "customerEmail": email},
    )
    assert response.status_code == 200, response.text
    return dict(response.json())


async def pay(http: httpx.AsyncClient, payment_url: str) -> None:
    """The customer presses Pay on the sandbox provider's page."""
    page = await http.get(payment_url)
    assert page.status_code == 200
    response = await http.post(f"{payment_url}/pay", follow_redirects=False)
    assert response.status_code in (302, 303), response.text
