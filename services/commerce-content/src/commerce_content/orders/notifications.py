"""Payment notifications: verified on the raw body, checked against the order's payment
session, processed once per provider event."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import structlog
from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError
from servicekit.events import record_event
from servicekit.signing import SignatureError, verify_stripe
from sqlalchemy import text
from sqlmodel import select
from sqlmodel.ext.asyncio.session import AsyncSession

from commerce_content.errors import InvalidRequest, NoSuchThing
from commerce_content.events import ORDER_PAID, OrderSummary
from commerce_content.models import Order, OrderItem, OrderStatus
from commerce_content.orders.stock import release_reservations, take_stock
from commerce_content.payments.provider import LineItem, minor_total
from commerce_content.settings import Settings

logger = structlog.get_logger(__name__)

COMPLETED = "checkout.session.completed"
# Delayed payment methods (bank debits): `completed` arrives with payment_status "unpaid",
# and this one when the money is in.
ASYNC_SUCCEEDED = "checkout.session.async_payment_succeeded"
EXPIRED = "checkout.session.expired"
PAYING_TYPES = frozenset({COMPLETED, ASYNC_SUCCEEDED})
SESSION_TYPES = PAYING_TYPES | {EXPIRED}
# Ids as the provider makes them: printable, bounded (the tables hold 255 and 100).
_PRINTABLE = r"^[^\x00-\x1f\x7f]+$"

_FIRST_TIME = text(
    """
    INSERT INTO payment_notifications (provider, event_id, event_type, received_at)
    VALUES (:provider, :event_id, :event_type, now())
    ON CONFLICT DO NOTHING
    RETURNING event_id
    """
)


class _EventData(BaseModel):
    object: dict[str, Any]


class ProviderEvent(BaseModel):
    """The envelope every provider event has; `data.object` is the thing it is about."""

    model_config = ConfigDict(extra="ignore")

    id: StrictStr = Field(min_length=1, max_length=255, pattern=_PRINTABLE)
    type: StrictStr = Field(min_length=1, max_length=100, pattern=_PRINTABLE)
    data: _EventData


class _Metadata(BaseModel):
    order_id: StrictStr


class CheckoutSessionObject(BaseModel):
    """The fields of a Checkout Session that decide whether an order is paid."""

    model_config = ConfigDict(extra="ignore")

    id: StrictStr = Field(min_length=1, max_length=255)
    payment_status: StrictStr
    amount_total: StrictInt | None
    currency: StrictStr
    payment_intent: StrictStr | None = None
    metadata: _Metadata


@dataclass(frozen=True)
class ExpectedPayment:
    """What the order's payment session asked for."""

    session_id: str | None
    amount_total: int
    currency: str


def expected_payment(order: Order, items: list[OrderItem]) -> ExpectedPayment:
    lines = [LineItem(i.name, i.price, i.quantity) for i in items]
    return ExpectedPayment(order.payment_session_id, minor_total(lines), order.currency.lower())


def payment_mismatch(expected: ExpectedPayment, paid: CheckoutSessionObject) -> str | None:
    """Why `paid` does not pay the order it names, or None when it does."""
    if expected.session_id is None or paid.id != expected.session_id:
        return f"checkout session {paid.id!r} is not this order's payment session"
    if paid.currency.lower() != expected.currency:
        return f"currency {paid.currency!r} is not the order's {expected.currency!r}"
    if paid.amount_total != expected.amount_total:
        return (
            f"amount_total {paid.amount_total} is not the order's {expected.amount_total} "
            "(minor units)"
        )
    return None


async def handle_notification(
    session: AsyncSession, provider: str, raw_body: bytes, signature: str | None, secret: str
) -> bool:
    """Verify and apply one notification; False when it was already processed."""
    try:
        verify_stripe(raw_body, signature, secret)
    except SignatureError as exc:
        raise InvalidRequest(f"Webhook signature verification failed: {exc}") from exc
    try:
        event = ProviderEvent.model_validate_json(raw_body)
    except ValidationError as exc:
        raise InvalidRequest(
            "The notification is not a provider event (id, type and a data.object object)"
        ) from exc
    connection = await session.connection()
    fresh = await connection.scalar(
        _FIRST_TIME, {"provider": provider, "event_id": event.id, "event_type": event.type}
    )
    if fresh is None:
        return False
    if event.type not in SESSION_TYPES:
        return True
    try:
        checkout = CheckoutSessionObject.model_validate(event.data.object)
    except ValidationError as exc:
        fields = sorted({".".join(str(p) for p in e["loc"]) for e in exc.errors()})
        raise InvalidRequest(
            f"data.object is not a checkout session: {', '.join(fields)} missing or invalid"
        ) from exc
    order = await _order_of(session, checkout)
    if event.type == EXPIRED:
        if order.status is OrderStatus.PENDING and checkout.id == order.payment_session_id:
            await release_reservations(session, [order])
        return True
    items = list(
        (await session.exec(select(OrderItem).where(OrderItem.order_id == order.id))).all()
    )
    problem = payment_mismatch(expected_payment(order, items), checkout)
    if problem is not None:
        # Refused, never paid: the transaction (and the event's idempotency row) rolls back,
        # so a corrected notification can still pay it.
        logger.warning("payment notification refused", order_id=str(order.id), problem=problem)
        raise InvalidRequest(f"The notification does not match order {order.id}: {problem}")
    if checkout.payment_status != "paid":
        return True  # acknowledged; a delayed payment pays later with ASYNC_SUCCEEDED
    await _mark_paid(session, order, items, checkout)
    return True


async def _order_of(session: AsyncSession, checkout: CheckoutSessionObject) -> Order:
    order_id = checkout.metadata.order_id
    try:
        order = await session.get(Order, uuid.UUID(order_id), with_for_update=True)
    except ValueError:
        order = None
    if order is None:
        raise InvalidRequest(f"No order {order_id!r} for this checkout session")
    return order


async def _mark_paid(
    session: AsyncSession, order: Order, items: list[OrderItem], checkout: CheckoutSessionObject
) -> None:
    if order.status is OrderStatus.PAID:
        return
    # Without its reservation (given back when the order expired, or never made for orders
    # placed before reservations) the stock is taken now if it is still there, never below
    # zero.
    if order.stock_reserved_at is None and not await take_stock(session, items):
        # Paid for goods that are gone: not marked paid (nothing would ship), kept for a
        # refund, loudly.
        order.payment_id = checkout.payment_intent or ""
        session.add(order)
        logger.error(
            "payment received for an order whose stock is gone; refund it",
            order_id=str(order.id),
            payment_id=order.payment_id,
            status=order.status,
        )
        return
    order.status = OrderStatus.PAID
    order.payment_id = checkout.payment_intent or ""
    order.paid_at = datetime.now(UTC)
    session.add(order)
    await session.flush()
    await record_event(session, ORDER_PAID, OrderSummary.of(order))
    logger.info("order paid", order_id=str(order.id), payment_id=order.payment_id)


PROVIDERS = ("stripe",)


class PaymentNotificationService:
    """The payment providers' notifications, verified with the configured secret."""

    def __init__(self, session: AsyncSession, settings: Settings) -> None:
        self.session = session
        self.settings = settings

    async def receive(self, provider: str, raw_body: bytes, signature: str | None) -> bool:
        if provider not in PROVIDERS:
            raise NoSuchThing(f"No payment provider '{provider}'")
        secret = self.settings.payment_webhook_secret.get_secret_value()
        return await handle_notification(self.session, provider, raw_body, signature, secret)
