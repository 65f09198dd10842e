"""Order queries for readers (GraphQL's orders, the dashboard)."""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal

from sqlalchemy import func
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from commerce_content.models import Order, OrderItem, OrderStatus, Product


@dataclass(frozen=True)
class CatalogueStats:
    products_total: int
    products_published: int
    products_out_of_stock: int
    orders_total: int
    orders_pending: int
    orders_paid: int
    revenue: Decimal


class OrderRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def get(self, order_id: uuid.UUID) -> Order | None:
        return await self.session.get(Order, order_id)

    async def by_payment_session(self, payment_session_id: str) -> Order | None:
        query = select(Order).where(Order.payment_session_id == payment_session_id)
        return (await self.session.exec(query)).first()

    async def items_of(self, order_id: uuid.UUID) -> list[OrderItem]:
        query = select(OrderItem).where(OrderItem.order_id == order_id).order_by(col(OrderItem.id))
        return list((await self.session.exec(query)).all())

    async def of_user(self, user_id: int, limit: int) -> list[Order]:
        query = (
            select(Order)
            .where(Order.user_id == user_id)
            .order_by(col(Order.created_at).desc(), col(Order.id))
            .limit(limit)
        )
        return list((await self.session.exec(query)).all())

    async def lines_of(self, order_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, list[OrderItem]]:
        query = (
            select(OrderItem)
            .where(col(OrderItem.order_id).in_(order_ids))
            .order_by(col(OrderItem.id))
        )
        grouped: dict[uuid.UUID, list[OrderItem]] = defaultdict(list)
        for item in (await self.session.exec(query)).all():
            grouped[item.order_id].append(item)
        return grouped

    async def stats(self) -> CatalogueStats:
        live = col(Product.deleted).is_(False)
        products = (
            await self.session.exec(
                select(
                    func.count().filter(live),
                    func.count().filter(live, col(Product.published)),
                    func.count().filter(live, col(Product.published), col(Product.stock) <= 0),
                ).select_from(Product)
            )
        ).one()
        orders = (
            await self.session.exec(
                select(
                    func.count(col(Order.id)),
                    func.count(col(Order.id)).filter(col(Order.status) == OrderStatus.PENDING),
                    func.count(col(Order.id)).filter(col(Order.status) == OrderStatus.PAID),
                    func.coalesce(
                        func.sum(col(Order.total)).filter(col(Order.status) == OrderStatus.PAID), 0
                    ),
                )
            )
        ).one()
        return CatalogueStats(
            products_total=int(products[0]),
            products_published=int(products[1]),
            products_out_of_stock=int(products[2]),
            orders_total=int(orders[0]),
            orders_pending=int(orders[1]),
            orders_paid=int(orders[2]),
            revenue=Decimal(orders[3]),
        )
