"""Checkout and payment notifications: thin over CheckoutService and
PaymentNotificationService."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Request, Response
from pydantic import BaseModel
from servicekit.web_session import SessionDep

from commerce_content.errors import (
    CheckoutError,
    IdempotencyKeyReused,
    InsufficientStock,
    InvalidAddress,
    InvalidRequest,
    NoSuchThing,
    NotAuthenticated,
    PaymentDeclined,
    ProductUnavailable,
    TooManyRequests,
    plain_errors,
)
from commerce_content.identity.dependencies import Caller, identify
from commerce_content.openapi import documented, with_errors
from commerce_content.orders import idempotency
from commerce_content.orders.checkout import CartLine, CheckoutResult, ShippingAddress
from commerce_content.orders.dependencies import (
    CheckoutServiceDep,
    IdempotentCheckoutDep,
    PaymentNotificationServiceDep,
)
from commerce_content.rate_limit.limiter import enforce_rate_limit

router = APIRouter(prefix="/orders", tags=["orders"])


class CheckoutCreated(BaseModel):
    orderId: str
    paymentUrl: str


class Received(BaseModel):
    received: bool


CHECKOUT_EXAMPLE = {
    "items": [{"productId": "21", "quantity": 2}],
    "customerEmail": "ada@example.com",
    "shippingAddress": {
        "name": "Ada Lovelace",
        "line1": "12 St James's Square",
        "city": "London",
        "postalCode": "SW1Y 4JH",
        "country": "GB",
    },
}
CHECKOUT_SCHEMA = {
    "type": "object",
    "required": ["items"],
    "properties": {
        "items": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["productId", "quantity"],
                "properties": {
                    "productId": {"type": "string", "pattern": "^[0-9]+$"},
                    "quantity": {"type": "integer", "minimum": 1, "maximum": 1_000_000},
                },
            },
        },
        "customerEmail": {"type": "string", "format": "email"},
        "shippingAddress": ShippingAddress.model_json_schema(by_alias=True),
    },
}
NOTIFICATION_EXAMPLE = {
    "id": "evt_1",
    "type": "checkout.session.completed",
    "data": {
        "object": {
            "id": "cs_sandbox_5f2a",
            "payment_intent": "pi_3Nq",
            "payment_status": "paid",
            "amount_total": 3998,
            "currency": "usd",
            "metadata": {"order_id": "0b7f6c1e-8a51-4d5e-9a57-1f3e5c2b7d90"},
        }
    },
}


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
    **with_errors(
        documented(
            "Check out a cart",
            "Prices and names come from the product records; the order is stored `pending`"
            " and a payment session is created. Pay at `paymentUrl`: with the sandbox"
            " provider, open it and press Pay (or `POST {paymentUrl}/pay`). Errors are 400"
            " `{error: <text>}`, the text starting with the GraphQL OrderErrorCode when there"
            " is one (`INSUFFICIENT_STOCK: items[0]: ...`). With an `Idempotency-Key` header"
            " (a V4 UUID), a retry with the same key and body returns the first answer for 24"
            " hours (`Idempotent-Replayed: true`) instead of a second order; the same key with"
            " another body is 422. Keys are scoped to the bearer credential's caller, if any.",
            request=CHECKOUT_EXAMPLE,
            request_schema=CHECKOUT_SCHEMA,
            response={
                "orderId": "0b7f6c1e-8a51-4d5e-9a57-1f3e5c2b7d90",
                "paymentUrl": "http://127.0.0.1:8003/api/orders/sandbox/cs_sandbox_5f2a",
            },
        ),
        plain_errors(
            InvalidRequest,
            NotAuthenticated,
            IdempotencyKeyReused,
            CheckoutError,
            InsufficientStock,
            InvalidAddress,
            PaymentDeclined,
            ProductUnavailable,
            TooManyRequests,
        ),
    ),
    dependencies=[Depends(enforce_rate_limit)],
)
async def checkout(
    request: Request,
    response: Response,
    service: CheckoutServiceDep,
    once: IdempotentCheckoutDep,
    session: SessionDep,
    idempotency_key: Annotated[
        str | None,
        Header(
            alias=idempotency.HEADER,
            description="A V4 UUID: a retry with the same key and body returns the first"
            " answer for 24 hours; the same key with another body is 422.",
        ),
    ] = None,
) -> CheckoutCreated:
    """`items` (non-empty, `{productId, quantity}`), `customerEmail`, `shippingAddress`
    (`{name, line1, line2?, city, postalCode, state?, country}`, snake_case accepted too;
    country ISO 3166-1 alpha-2). `Idempotency-Key` makes a retry return the first answer."""
    key = idempotency.parse_key(idempotency_key)
    body = await _json_object(request)
    items = body.get("items")
    if not isinstance(items, list) or not items:
        raise InvalidRequest("items is required and must not be empty")
    if not all(isinstance(item, dict) for item in items):
        raise InvalidRequest("every item is an object with productId and quantity")
    caller = None if key is None else await _optional_caller(request, session)

    async def run() -> CheckoutResult:
        return await service.checkout(
            [CartLine(item.get("productId"), item.get("quantity")) for item in items],
            body.get("customerEmail"),
            body.get("shippingAddress"),
        )

    answer = await once.run(
        idempotency.scope_of(caller),
        key,
        idempotency.fingerprint(idempotency.REST_SURFACE, body),
        run,
    )
    if answer.replayed:
        response.headers["Idempotent-Replayed"] = "true"
    return CheckoutCreated(orderId=str(answer.order_id), paymentUrl=answer.payment_url)


async def _optional_caller(request: Request, session: SessionDep) -> Caller | None:
    """Checkout is public; a bearer credential sent with an Idempotency-Key scopes the key to
    its caller, so it must be right (401): a wrong one must not fall back to the shared
    anonymous scope."""
    header = request.headers.get("authorization")
    if not header:
        return None
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise NotAuthenticated("Use 'Authorization: Bearer <token>'")
    return await identify(token.strip(), request.app.state.settings, session)


@router.post(
    "/webhook/{payment_provider}",
    response_model=Received,
    **with_errors(
        documented(
            "Receive a payment notification",
            "The provider's raw body, verified with `Stripe-Signature` (300 s tolerance)"
            " against the configured secret; `checkout.session.completed` marks the order"
            " `paid`, other types are acknowledged. Processed once per provider event id.",
            request=NOTIFICATION_EXAMPLE,
            request_schema={"type": "object"},
            response={"received": True},
        ),
        plain_errors(InvalidRequest, NoSuchThing),
    ),
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
