"""Checkout, payment notifications, and the sandbox provider's payment page."""

from __future__ import annotations

import html
import json
import secrets
import time
from decimal import Decimal
from typing import Any

import httpx
from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from pydantic import BaseModel
from servicekit.db.engine import SessionDep
from servicekit.signing import sign_stripe
from servicekit.web.errors import BadRequest, NotFound, ServiceUnavailable
from sqlmodel import select

from commerce_content.errors import PLAIN_ERRORS, PLAIN_NOT_FOUND
from commerce_content.models import Order, OrderItem
from commerce_content.orders.checkout import CartLine, CheckoutProblem, CheckoutService
from commerce_content.orders.notifications import COMPLETED, handle_notification
from commerce_content.payments.provider import payment_provider
from commerce_content.rate_limit.limiter import enforce_rate_limit
from commerce_content.settings import Settings

router = APIRouter(prefix="/orders", tags=["orders"])
PROVIDERS = ("stripe",)


class CheckoutCreated(BaseModel):
    orderId: str
    paymentUrl: str


class Received(BaseModel):
    received: bool


def _settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


@router.post(
    "/checkout",
    response_model=CheckoutCreated,
    responses=PLAIN_ERRORS,
    dependencies=[Depends(enforce_rate_limit)],
)
async def checkout(request: Request, session: SessionDep) -> CheckoutCreated:
    """`items` (non-empty, `{productId, quantity}`), `customerEmail`, `shippingAddress`
    (`{name, line1, line2?, city, postal_code, state?, country}`, country ISO 3166-1 alpha-2)."""
    try:
        body: Any = await request.json()
    except ValueError as exc:
        raise BadRequest("The body must be JSON") from exc
    if not isinstance(body, dict):
        raise BadRequest("The body must be a JSON object")
    items = body.get("items")
    if not isinstance(items, list) or not items:
        raise BadRequest("items is required and must not be empty")
    if not all(isinstance(item, dict) for item in items):
        raise BadRequest("every item is an object with productId and quantity")
    email = body.get("customerEmail")
    if email is not None and (not isinstance(email, str) or "@" not in email or len(email) > 320):
        raise BadRequest("customerEmail is not a valid address")
    settings = _settings(request)
    service = CheckoutService(session, settings, payment_provider(settings))
    try:
        result = await service.checkout(
            [CartLine(item.get("productId"), item.get("quantity")) for item in items],
            email,
            body.get("shippingAddress"),
        )
    except CheckoutProblem as problem:
        raise BadRequest(problem.message) from problem
    return CheckoutCreated(orderId=str(result.order.id), paymentUrl=result.payment_url)


@router.post(
    "/webhook/{payment_provider}",
    response_model=Received,
    responses={**PLAIN_ERRORS, **PLAIN_NOT_FOUND},
)
async def payment_webhook(payment_provider: str, request: Request, session: SessionDep) -> Received:
    """Stripe-signed notifications (`Stripe-Signature`, 300 s tolerance); the sandbox signs
    the same way. Processed once per provider event id."""
    if payment_provider not in PROVIDERS:
        raise NotFound(f"No payment provider '{payment_provider}'")
    raw = await request.body()
    secret = _settings(request).payment_webhook_secret.get_secret_value()
    await handle_notification(
        session, payment_provider, raw, request.headers.get("stripe-signature"), secret
    )
    return Received(received=True)


async def _sandbox_order(session: SessionDep, session_id: str) -> Order:
    if not session_id.startswith("cs_sandbox_"):
        raise NotFound("No such sandbox payment")
    order = (
        await session.exec(select(Order).where(Order.payment_session_id == session_id))
    ).first()
    if order is None:
        raise NotFound("No such sandbox payment")
    return order


@router.get("/sandbox/{session_id}", response_class=HTMLResponse, include_in_schema=False)
async def sandbox_page(session_id: str, request: Request, session: SessionDep) -> HTMLResponse:
    order = await _sandbox_order(session, session_id)
    items = (await session.exec(select(OrderItem).where(OrderItem.order_id == order.id))).all()
    rows = "".join(
        f"<tr><td>{html.escape(i.name)}</td><td>{i.quantity}</td><td>{i.price}</td></tr>"
        for i in items
    )
    state = (
        "<p>Paid. Thank you.</p>"
        if order.status == "paid"
        else f'<form method="post" action="{html.escape(session_id)}/pay">'
        '<button type="submit">Pay</button></form>'
    )
    return HTMLResponse(
        "<!doctype html><html><head><meta charset='utf-8'><title>Sandbox payment</title></head>"
        f"<body><h1>Sandbox payment</h1><p>Order {order.id}</p>"
        f"<table><tr><th>Item</th><th>Qty</th><th>Price</th></tr>{rows}</table>"
        f"<p>Total: {order.total} {order.currency}</p>{state}</body></html>",
        headers={"Cache-Control": "no-store"},
    )


@router.post("/sandbox/{session_id}/pay", include_in_schema=False)
async def sandbox_pay(session_id: str, request: Request, session: SessionDep) -> RedirectResponse:
    """Pay: send our own webhook a Stripe-signed `checkout.session.completed`, over HTTP, as
    the provider would; then go to the frontend's success address."""
    order = await _sandbox_order(session, session_id)
    settings = _settings(request)
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
                "amount_total": int(Decimal(order.total) * 100),
                "currency": order.currency.lower(),
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
        raise ServiceUnavailable(f"The sandbox could not reach {url}") from exc
    if response.status_code != 200:
        raise ServiceUnavailable(f"The webhook answered {response.status_code}")
    base = settings.frontend_url.rstrip("/")
    return RedirectResponse(f"{base}/checkout/success?order={order.id}", status_code=303)
