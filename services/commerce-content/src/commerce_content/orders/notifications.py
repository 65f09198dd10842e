"""Payment notifications: verified on the raw body, processed once per provider event."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any

from servicekit.events import record_event
from servicekit.signing import SignatureError, verify_stripe
from servicekit.web.errors import BadRequest
from sqlalchemy import text, update
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from commerce_content.events import ORDER_PAID, OrderSummary
from commerce_content.models import Order, OrderItem, Product

COMPLETED = "checkout.session.completed"
_FIRST_TIME = text(
    """
    INSERT INTO payment_notifications (provider, event_id, event_type, received_at)
    VALUES (:provider, :event_id, :event_type, now())
    ON CONFLICT DO NOTHING
    RETURNING event_id
    """
)


async def handle_notification(
    session: AsyncSession, provider: str, raw_body: bytes, signature: str | None, secret: str
) -> bool:
    """Verify and apply one notification; False when it was already processed."""
    try:
        verify_stripe(raw_body, signature, secret)
    except SignatureError as exc:
        raise BadRequest(f"Webhook signature verification failed: {exc}") from exc
    try:
        event: Any = json.loads(raw_body)
        event_id, event_type = str(event["id"]), str(event["type"])
    except (ValueError, KeyError, TypeError) as exc:
        raise BadRequest("The notification is not a provider event") from exc
    connection = await session.connection()
    fresh = await connection.scalar(
        _FIRST_TIME, {"provider": provider, "event_id": event_id, "event_type": event_type}
    )
    if fresh is None or event_type != COMPLETED:
        return fresh is not None
    checkout = event.get("data", {}).get("object", {})
    order_id = (checkout.get("metadata") or {}).get("order_id")
    try:
        order = await session.get(Order, uuid.UUID(str(order_id)), with_for_update=True)
    except ValueError:
        order = None
    if order is None:
        raise BadRequest(f"No order {order_id!r} for this checkout session")
    if order.status == "pending":
        order.status = "paid"
        order.payment_id = str(checkout.get("payment_intent") or "")
        order.paid_at = datetime.now(UTC)
        session.add(order)
        await _take_stock(session, order.id)
        await session.flush()
        await record_event(session, ORDER_PAID, OrderSummary.of(order))
    return True


async def _take_stock(session: AsyncSession, order_id: uuid.UUID) -> None:
    """Stock is checked at checkout and taken when the payment completes."""
    items = (await session.exec(select(OrderItem).where(OrderItem.order_id == order_id))).all()
    for item in items:
        await session.exec(
            update(Product)
            .where(col(Product.id) == item.product_id)
            .values(stock=Product.stock - item.quantity)
        )
