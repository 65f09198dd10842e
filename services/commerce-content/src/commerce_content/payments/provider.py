"""The payment provider interface, and the two providers: Stripe and the local sandbox."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import ROUND_HALF_UP, Decimal
from typing import Protocol

import structlog

from commerce_content.errors import PaymentDeclined
from commerce_content.settings import Settings

logger = structlog.get_logger(__name__)


@dataclass(frozen=True)
class LineItem:
    name: str
    unit_price: Decimal
    quantity: int

    @property
    def unit_amount(self) -> int:
        """Minor units: price x 100, rounded half up (the spec's rule)."""
        return int((self.unit_price * 100).quantize(Decimal("1"), rounding=ROUND_HALF_UP))


def minor_total(lines: Sequence[LineItem]) -> int:
    """What the provider is asked to collect, in minor units: the sum of each line's unit
    amount times its quantity."""
    return sum(line.unit_amount * line.quantity for line in lines)


@dataclass(frozen=True)
class CheckoutRequest:
    order_id: str
    currency: str
    lines: Sequence[LineItem]
    success_url: str
    cancel_url: str
    customer_email: str | None
    expires_at: datetime


@dataclass(frozen=True)
class CheckoutSession:
    id: str
    url: str


class PaymentProvider(Protocol):
    name: str

    async def create_session(self, request: CheckoutRequest) -> CheckoutSession: ...

    async def expire_session(self, session_id: str) -> None:
        """Close a session whose order was not placed (its stock ran out meanwhile)."""
        ...


class SandboxProvider:
    """Payments that never leave the machine: the payment page is ours, and paying sends a
    Stripe-signed `checkout.session.completed` to our own webhook, so the flow runs through the
    same verification code as production."""

    name = "sandbox"
    DECLINING_EMAIL_MARK = "+decline@"

    def __init__(self, settings: Settings) -> None:
        if settings.is_production:
            # Settings refuse this already; a copy made without validation must not slip by.
            raise ValueError("the sandbox payment provider never runs in production")
        self.base_url = settings.public_base_url.rstrip("/")

    async def create_session(self, request: CheckoutRequest) -> CheckoutSession:
        # A test card number for the sandbox: customers whose address carries "+decline@".
        if request.customer_email and self.DECLINING_EMAIL_MARK in request.customer_email:
            raise PaymentDeclined("The sandbox declines payments for +decline addresses")
        session_id = f"cs_sandbox_{secrets.token_hex(12)}"
        return CheckoutSession(session_id, f"{self.base_url}/api/orders/sandbox/{session_id}")

    async def expire_session(self, session_id: str) -> None:
        """Nothing to close: a sandbox session is its order's, and without the order its page
        is a 404."""


class StripeProvider:
    """Stripe Checkout through the official SDK."""

    name = "stripe"

    def __init__(self, settings: Settings) -> None:
        if settings.stripe_api_key is None:
            raise ValueError("COMMERCE_CONTENT_STRIPE_API_KEY is required for the stripe provider")
        import stripe

        self._client = stripe.StripeClient(settings.stripe_api_key.get_secret_value())

    async def create_session(self, request: CheckoutRequest) -> CheckoutSession:
        import stripe

        params = {
            "mode": "payment",
            "success_url": request.success_url,
            "cancel_url": request.cancel_url,
            "metadata": {"order_id": request.order_id},
            "expires_at": int(request.expires_at.timestamp()),
            "line_items": [
                {
                    "quantity": line.quantity,
                    "price_data": {
                        "currency": request.currency,
                        "unit_amount": line.unit_amount,
                        "product_data": {"name": line.name},
                    },
                }
                for line in request.lines
            ],
        }
        if request.customer_email:
            params["customer_email"] = request.customer_email
        try:
            session = await asyncio.to_thread(
                self._client.checkout.sessions.create,
                params,  # type: ignore[arg-type]
            )
        except stripe.CardError as exc:
            raise PaymentDeclined(str(exc)) from exc
        return CheckoutSession(str(session.id), str(session.url))

    async def expire_session(self, session_id: str) -> None:
        import stripe

        try:
            await asyncio.to_thread(self._client.checkout.sessions.expire, session_id)
        except stripe.StripeError as exc:
            # It expires by itself at its expires_at; until then nobody has its address.
            logger.warning("checkout session not expired", session_id=session_id, error=str(exc))


def payment_provider(settings: Settings) -> PaymentProvider:
    if settings.payment_provider == "stripe":
        return StripeProvider(settings)
    return SandboxProvider(settings)


def sandbox_enabled(settings: Settings) -> bool:
    """Whether the sandbox's payment page is served: only outside production, with the
    sandbox chosen."""
    return not settings.is_production and settings.payment_provider in (None, "sandbox")
