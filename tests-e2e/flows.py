"""What the flows do through the services' public interfaces."""

from __future__ import annotations

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
