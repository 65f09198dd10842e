"""Stock: reserved at checkout, given back when the order expires unpaid, never below zero.

Every change is one conditional UPDATE per product (`stock >= n`), in product-id order so two
carts holding the same products never deadlock; the row lock it takes makes a concurrent
checkout wait for the first to commit and then see what is left.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta

import structlog
from servicekit.events import record_event
from servicekit.runtime import ServiceRuntime
from servicekit.worker import WorkerLoop
from sqlalchemy import text
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from commerce_content.events import ORDER_EXPIRED, OrderSummary
from commerce_content.models import Order, OrderItem, OrderStatus
from commerce_content.settings import Settings

logger = structlog.get_logger(__name__)

_TAKE = text(
    "UPDATE products SET stock = stock - :n, updated_at = now()"
    " WHERE id = :id AND stock >= :n RETURNING id"
)
_GIVE_BACK = text("UPDATE products SET stock = stock + :n, updated_at = now() WHERE id = :id")
# Pending orders whose reservation ran out; locked so a payment notification for one of them
# (which locks its order) is either before this or sees it expired.
_DUE = text(
    """
    SELECT id FROM orders
    WHERE status = :pending AND stock_reserved_at IS NOT NULL AND expires_at < :before
    ORDER BY expires_at LIMIT :limit FOR UPDATE SKIP LOCKED
    """
)
EXPIRY_POLL_SECONDS = 30.0
EXPIRY_BATCH = 200


def quantities(pairs: Iterable[tuple[int, int]]) -> dict[int, int]:
    """Quantity wanted per product, from (product id, quantity) lines."""
    wanted: dict[int, int] = {}
    for product_id, quantity in pairs:
        wanted[product_id] = wanted.get(product_id, 0) + quantity
    return wanted


def release_due_before(now: datetime, grace_seconds: float) -> datetime:
    """Reservations are given back this long after the payment session expired, so a payment
    completed at the last moment finds its stock when its notification arrives."""
    return now - timedelta(seconds=grace_seconds)


async def reserve(session: AsyncSession, wanted: dict[int, int]) -> int | None:
    """Take `wanted` from stock; returns the first product that is short (the caller's
    transaction then rolls back what was taken), or None."""
    connection = await session.connection()
    for product_id in sorted(wanted):
        taken = await connection.scalar(_TAKE, {"id": product_id, "n": wanted[product_id]})
        if taken is None:
            return product_id
    return None


class _Short(Exception):
    pass


async def take_stock(session: AsyncSession, items: Iterable[OrderItem]) -> bool:
    """All of an order's lines or nothing (a savepoint), never below zero."""
    wanted = quantities((i.product_id, i.quantity) for i in items)
    try:
        async with session.begin_nested():
            if await reserve(session, wanted) is not None:
                raise _Short
    except _Short:
        return False
    return True


async def release_reservations(session: AsyncSession, orders: Sequence[Order]) -> None:
    """Unpaid orders give their stock back (those holding any: orders placed before
    reservations do not) and become `expired`, each with its `order.expired` event in the
    same transaction. One pass over all their products in id order, like checkout's, so the
    two never wait on each other in a circle."""
    holding = [o.id for o in orders if o.stock_reserved_at is not None]
    if holding:
        items = (
            await session.exec(select(OrderItem).where(col(OrderItem.order_id).in_(holding)))
        ).all()
        connection = await session.connection()
        wanted = quantities((i.product_id, i.quantity) for i in items)
        for product_id in sorted(wanted):
            await connection.execute(_GIVE_BACK, {"id": product_id, "n": wanted[product_id]})
    for order in orders:
        order.status = OrderStatus.EXPIRED
        order.stock_reserved_at = None
        session.add(order)
    await session.flush()
    for order in orders:
        await record_event(session, ORDER_EXPIRED, OrderSummary.of(order))


async def expire_due_orders(session: AsyncSession, now: datetime, grace_seconds: float) -> int:
    """Expire one batch of orders whose reservation ran out; returns how many."""
    connection = await session.connection()
    due = (
        await connection.execute(
            _DUE,
            {
                "before": release_due_before(now, grace_seconds),
                "limit": EXPIRY_BATCH,
                "pending": OrderStatus.PENDING,
            },
        )
    ).all()
    if not due:
        return 0
    orders = (await session.exec(select(Order).where(col(Order.id).in_([r.id for r in due])))).all()
    await release_reservations(session, orders)
    return len(orders)


def order_expiry_loop(settings: Settings) -> WorkerLoop:
    async def run(runtime: ServiceRuntime, stop: asyncio.Event) -> None:
        runtime.progress.beat("order-expiry", EXPIRY_POLL_SECONDS)
        while not stop.is_set():
            try:
                async with runtime.session_factory() as session, session.begin():
                    expired = await expire_due_orders(
                        session, datetime.now(UTC), settings.checkout_expiry_grace_seconds
                    )
                runtime.progress.beat("order-expiry", EXPIRY_POLL_SECONDS)
                if expired:
                    logger.info("unpaid orders expired, stock given back", orders=expired)
                    continue  # maybe more due: no wait
            except Exception as exc:
                logger.warning("order expiry failed", error=repr(exc))
            try:
                await asyncio.wait_for(stop.wait(), EXPIRY_POLL_SECONDS)
            except TimeoutError:
                continue

    return run
