"""The schema's object types. Products, variants, orders and users are `Node`s with global ids.

Field choices where the spec says "not shown" are listed in the service README.
"""

from __future__ import annotations

from collections.abc import Generator
from datetime import datetime
from decimal import Decimal
from enum import Enum
from typing import Annotated, Any, cast

import strawberry
from strawberry.dataloader import DataLoader

from commerce_content.graphql_api.context import Context
from commerce_content.graphql_api.directives import (
    CacheControl,
    CacheControlScope,
    guarded_field,
)
from commerce_content.graphql_api.errors import bad_input
from commerce_content.graphql_api.ids import global_id
from commerce_content.graphql_api.scalars import CurrencyCode
from commerce_content.identity.roles import Role as IdentityRole
from commerce_content.models import Order as OrderRow
from commerce_content.models import OrderItem as OrderItemRow
from commerce_content.models import OrderStatus as OrderRowStatus
from commerce_content.models import Product as ProductRow
from commerce_content.models import User as UserRow
from commerce_content.orders.checkout import unit_price
from commerce_content.orders.repository import CatalogueStats, OrderRepository
from commerce_content.products.repository import VariantRecord

MAX_ORDERS = 100
VariantLoader = DataLoader[int, list[VariantRecord]]


@strawberry.interface(description="An object with a globally unique id, fetchable with `node`.")
class Node:
    id: strawberry.ID


@strawberry.type(description="Prices of a product.", directives=[CacheControl(max_age=30)])
class ProductPricing:
    base_price: Decimal
    sale_price: Decimal | None
    currency: CurrencyCode


@strawberry.type(
    description="A purchasable variant of a product (a size, a colour).",
    directives=[CacheControl(max_age=60)],
)
class ProductVariant(Node):
    sku: str
    name: str
    price: Decimal = strawberry.field(
        description="The variant's own price, else the product's current price."
    )
    in_stock: bool
    row: strawberry.Private[VariantRecord]

    @guarded_field(auth=IdentityRole.MANAGER, description="Units in stock (shop staff only).")
    def stock(self) -> int | None:
        return self.row.stock

    @classmethod
    def of(cls, row: VariantRecord, product: ProductRow) -> ProductVariant:
        return cls.all_of([row], product)[0]

    @classmethod
    def all_of(cls, rows: list[VariantRecord], product: ProductRow) -> list[ProductVariant]:
        product_price = unit_price(product)
        return [
            cls(
                id=strawberry.ID(global_id("ProductVariant", row.id)),
                sku=row.sku,
                name=row.name,
                price=row.price if row.price is not None else product_price,
                in_stock=row.stock > 0,
                row=row,
            )
            for row in rows
        ]


@strawberry.type(description="A product of the catalogue.", directives=[CacheControl(max_age=60)])
class Product(Node):
    name: str
    pricing: ProductPricing
    row: strawberry.Private[ProductRow]

    @guarded_field(deprecation_reason="Use `pricing.basePrice`.")
    def price(self) -> Decimal | None:
        return self.row.base_price

    # A list when the page that holds this product loaded every variant of the page at once;
    # otherwise loaded on demand (see VariantsOnDemand).
    variants: list[ProductVariant]

    @classmethod
    def of(cls, row: ProductRow, variants: list[VariantRecord] | VariantLoader) -> Product:
        return cls(
            id=strawberry.ID(global_id("Product", row.id)),
            name=row.name,
            pricing=ProductPricing(
                base_price=row.base_price,
                sale_price=row.sale_price,
                currency=CurrencyCode(row.currency),
            ),
            row=row,
            variants=(
                ProductVariant.all_of(variants, row)
                if isinstance(variants, list)
                # graphql-core awaits an awaitable field value as it would a resolver's.
                else cast("list[ProductVariant]", VariantsOnDemand(variants, row))
            ),
        )


class VariantsOnDemand:
    """A product's variants, loaded only when the query awaits them, through the request's
    DataLoader (one query for every product of the response)."""

    def __init__(self, loader: VariantLoader, product: ProductRow) -> None:
        self.loader = loader
        self.product = product

    def __await__(self) -> Generator[Any, None, list[ProductVariant]]:
        return self._load().__await__()

    async def _load(self) -> list[ProductVariant]:
        rows = await self.loader.load(self.product.id)
        return ProductVariant.all_of(rows, self.product)


@strawberry.type(description="A page of products.", directives=[CacheControl(max_age=60)])
class ProductEdge:
    node: Product
    cursor: str


@strawberry.type(
    description="Where a page sits in the whole list (Relay).",
    directives=[CacheControl(max_age=60)],
)
class PageInfo:
    has_next_page: bool
    has_previous_page: bool
    start_cursor: str | None
    end_cursor: str | None


@strawberry.enum(description="Where an order stands.")
class OrderStatus(Enum):
    PENDING = "pending"
    PAID = "paid"
    EXPIRED = "expired"


@strawberry.type(description="One line of an order, priced when the order was placed.")
class OrderLine:
    product_id: strawberry.ID
    name: str
    unit_price: Decimal
    quantity: int
    subtotal: Decimal

    @classmethod
    def of(cls, row: OrderItemRow) -> OrderLine:
        return cls(
            product_id=strawberry.ID(global_id("Product", row.product_id)),
            name=row.name,
            unit_price=row.price,
            quantity=row.quantity,
            subtotal=row.price * row.quantity,
        )


@strawberry.type(
    description="An order: visible to the customer who placed it and to shop staff.",
    directives=[CacheControl(max_age=0, scope=CacheControlScope.PRIVATE)],
)
class Order(Node):
    status: OrderStatus
    total: Decimal
    currency: CurrencyCode
    customer_email: str | None
    payment_url: str | None = strawberry.field(
        description="Where the customer pays; null once paid."
    )
    created_at: datetime
    paid_at: datetime | None
    row: strawberry.Private[OrderRow]

    @strawberry.field
    async def lines(self, info: Context) -> list[OrderLine]:
        rows = await info.context.lines_by_order.load(self.row.id)
        return [OrderLine.of(row) for row in rows]

    @classmethod
    def of(cls, row: OrderRow) -> Order:
        return cls(
            id=strawberry.ID(global_id("Order", row.id)),
            status=OrderStatus(row.status),
            total=row.total,
            currency=CurrencyCode(row.currency),
            customer_email=row.customer_email,
            payment_url=row.payment_url if row.status is OrderRowStatus.PENDING else None,
            created_at=row.created_at,
            paid_at=row.paid_at,
            row=row,
        )


@strawberry.type(
    description="A user of the shop.",
    directives=[CacheControl(max_age=30, scope=CacheControlScope.PRIVATE)],
)
class User(Node):
    email: str
    name: str
    role: IdentityRole
    row: strawberry.Private[UserRow]

    @guarded_field(auth=IdentityRole.USER, description="The user's latest orders, newest first.")
    async def orders(
        self, info: Context, first: Annotated[int, strawberry.argument()] = 10
    ) -> list[Order] | None:
        if not 0 <= first <= MAX_ORDERS:
            raise bad_input(f"first must be between 0 and {MAX_ORDERS}")
        async with info.context.db() as session:
            rows = await OrderRepository(session).of_user(self.row.id, first)
        return [Order.of(row) for row in rows]

    @classmethod
    def of(cls, row: UserRow) -> User:
        return cls(
            id=strawberry.ID(global_id("User", row.id)),
            email=row.email,
            name=row.name,
            role=IdentityRole(row.role),
            row=row,
        )


@strawberry.type(description="Figures for shop staff.")
class DashboardStats:
    products_total: int
    products_published: int
    products_out_of_stock: int = strawberry.field(description="Published products with no stock.")
    orders_total: int
    orders_pending: int
    orders_paid: int
    currency: CurrencyCode
    figures: strawberry.Private[CatalogueStats]

    @guarded_field(auth=IdentityRole.ADMIN, description="Sum of paid orders (admins only).")
    def revenue(self) -> Decimal | None:
        return self.figures.revenue

    @classmethod
    def of(cls, figures: CatalogueStats, currency: str) -> DashboardStats:
        return cls(
            products_total=figures.products_total,
            products_published=figures.products_published,
            products_out_of_stock=figures.products_out_of_stock,
            orders_total=figures.orders_total,
            orders_pending=figures.orders_pending,
            orders_paid=figures.orders_paid,
            currency=CurrencyCode(currency.upper()),
            figures=figures,
        )
