"""Checkout and payment notifications."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel
from servicekit.errors import BadRequest, NotFound
from servicekit.web.session import SessionDep

from commerce_content.errors import PLAIN_ERRORS, PLAIN_NOT_FOUND
from commerce_content.orders.checkout import CartLine, CheckoutProblem, CheckoutService
from commerce_content.orders.notifications import handle_notification
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
    (`{name, line1, line2?, city, postalCode, state?, country}`, snake_case accepted too;
    country ISO 3166-1 alpha-2)."""
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
        raise BadRequest(problem.text) from problem
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
