"""Checkout and payment notifications: thin over CheckoutService and
PaymentNotificationService."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel

from commerce_content.dependencies import CheckoutServiceDep, PaymentNotificationServiceDep
from commerce_content.errors import (
    CheckoutError,
    InsufficientStock,
    InvalidAddress,
    InvalidRequest,
    NoSuchThing,
    PaymentDeclined,
    ProductUnavailable,
    TooManyRequests,
    plain_errors,
)
from commerce_content.orders.checkout import CartLine
from commerce_content.rate_limit.limiter import enforce_rate_limit

router = APIRouter(prefix="/orders", tags=["orders"])


class CheckoutCreated(BaseModel):
    orderId: str
    paymentUrl: str


class Received(BaseModel):
    received: bool


async def _json_object(request: Request) -> dict[str, Any]:
    try:
        body: Any = await request.json()
    except ValueError as exc:
        raise InvalidRequest("The body must be JSON") from exc
    if not isinstance(body, dict):
        raise InvalidRequest("The body must be a JSON object")
    return body


@router.post(
    "/checkout",
    response_model=CheckoutCreated,
    responses=plain_errors(
        InvalidRequest,
        CheckoutError,
        InsufficientStock,
        InvalidAddress,
        PaymentDeclined,
        ProductUnavailable,
        TooManyRequests,
    ),
    dependencies=[Depends(enforce_rate_limit)],
)
async def checkout(request: Request, service: CheckoutServiceDep) -> CheckoutCreated:
    """`items` (non-empty, `{productId, quantity}`), `customerEmail`, `shippingAddress`
    (`{name, line1, line2?, city, postalCode, state?, country}`, snake_case accepted too;
    country ISO 3166-1 alpha-2)."""
    body = await _json_object(request)
    items = body.get("items")
    if not isinstance(items, list) or not items:
        raise InvalidRequest("items is required and must not be empty")
    if not all(isinstance(item, dict) for item in items):
        raise InvalidRequest("every item is an object with productId and quantity")
    result = await service.checkout(
        [CartLine(item.get("productId"), item.get("quantity")) for item in items],
        body.get("customerEmail"),
        body.get("shippingAddress"),
    )
    return CheckoutCreated(orderId=str(result.order.id), paymentUrl=result.payment_url)


@router.post(
    "/webhook/{payment_provider}",
    response_model=Received,
    responses=plain_errors(InvalidRequest, NoSuchThing),
)
async def payment_webhook(
    payment_provider: str, request: Request, service: PaymentNotificationServiceDep
) -> Received:
    """Stripe-signed notifications (`Stripe-Signature`, 300 s tolerance); the sandbox signs
    the same way. Processed once per provider event id."""
    await service.receive(
        payment_provider, await request.body(), request.headers.get("stripe-signature")
    )
    return Received(received=True)
