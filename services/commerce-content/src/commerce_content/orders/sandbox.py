"""The sandbox provider's payment page. Mounted only outside production with the sandbox
chosen (`sandbox_enabled`): its Pay button pays without any payment."""

from __future__ import annotations

import html
import json
import secrets
import time
from datetime import UTC, datetime

import httpx
from fastapi import APIRouter
from fastapi.responses import HTMLResponse, RedirectResponse
from servicekit.signing import sign_stripe

from commerce_content.errors import AlreadyDone, NoSuchThing, UpstreamUnavailable
from commerce_content.models import Order, OrderStatus
from commerce_content.orders.dependencies import OrderRepositoryDep
from commerce_content.orders.notifications import COMPLETED, expected_payment
from commerce_content.orders.repository import OrderRepository
from commerce_content.settings import SettingsDep

sandbox_router = APIRouter(prefix="/orders/sandbox", tags=["orders"], include_in_schema=False)


async def _sandbox_order(orders: OrderRepository, session_id: str) -> Order:
    if not session_id.startswith("cs_sandbox_"):
        raise NoSuchThing("No such sandbox payment")
    order = await orders.by_payment_session(session_id)
    if order is None:
        raise NoSuchThing("No such sandbox payment")
    return order


def _expired(order: Order) -> bool:
    """As a provider's session: past its expiry, or its order no longer pending payment."""
    if order.status is OrderStatus.EXPIRED:
        return True
    return order.expires_at is not None and order.expires_at <= datetime.now(UTC)


@sandbox_router.get("/{session_id}", response_class=HTMLResponse)
async def sandbox_page(session_id: str, orders: OrderRepositoryDep) -> HTMLResponse:
    order = await _sandbox_order(orders, session_id)
    items = await orders.items_of(order.id)
    rows = "".join(
        f"<tr><td>{html.escape(i.name)}</td><td>{i.quantity}</td><td>{i.price}</td></tr>"
        for i in items
    )
    if order.status is OrderStatus.PAID:
        state = "<p>Paid. Thank you.</p>"
    elif _expired(order):
        state = "<p>This payment session has expired.</p>"
    else:
        state = (
            f'<form method="post" action="{html.escape(session_id)}/pay">'
            '<button type="submit">Pay</button></form>'
        )
    return HTMLResponse(
        "<!doctype html><html><head><meta charset='utf-8'><title>Sandbox payment</title></head>"
        f"<body><h1>Sandbox payment</h1><p>Order {order.id}</p>"
        f"<table><tr><th>Item</th><th>Qty</th><th>Price</th></tr>{rows}</table>"
        f"<p>Total: {order.total} {order.currency}</p>{state}</body></html>",
        headers={"Cache-Control": "no-store"},
    )


@sandbox_router.post("/{session_id}/pay")
async def sandbox_pay(
    session_id: str, orders: OrderRepositoryDep, settings: SettingsDep
) -> RedirectResponse:
    """Pay: send our own webhook a Stripe-signed `checkout.session.completed`, over HTTP, as
    the provider would; then go to the frontend's success address."""
    order = await _sandbox_order(orders, session_id)
    if order.status is not OrderStatus.PAID and _expired(order):
        raise AlreadyDone("This payment session has expired")
    items = await orders.items_of(order.id)
    expected = expected_payment(order, items)
    event = {
        "id": f"evt_sandbox_{secrets.token_hex(12)}",
        "object": "event",
        "type": COMPLETED,
        "created": int(time.time()),
        "data": {
            "object": {
                "id": session_id,
                "object": "checkout.session",
                "payment_intent": f"pi_sandbox_{secrets.token_hex(12)}",
                "payment_status": "paid",
                "amount_total": expected.amount_total,
                "currency": expected.currency,
                "metadata": {"order_id": str(order.id)},
            }
        },
    }
    payload = json.dumps(event).encode()
    signature = sign_stripe(payload, settings.payment_webhook_secret.get_secret_value())
    url = f"{settings.public_base_url.rstrip('/')}/api/orders/webhook/stripe"
    try:
        async with httpx.AsyncClient(timeout=10) as http:
            response = await http.post(
                url,
                content=payload,
                headers={"Stripe-Signature": signature, "Content-Type": "application/json"},
            )
    except httpx.HTTPError as exc:
        raise UpstreamUnavailable(f"The sandbox could not reach {url}") from exc
    if response.status_code != 200:
        raise UpstreamUnavailable(f"The webhook answered {response.status_code}")
    base = settings.frontend_url.rstrip("/")
    return RedirectResponse(f"{base}/checkout/success?order={order.id}", status_code=303)
