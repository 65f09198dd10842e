"""Checkout: an order priced from the product records, and a payment session for it.

Shared by the REST endpoint and GraphQL's `createOrder`: both call `CheckoutService` and map its
errors (`commerce_content.errors.CheckoutError` and its kinds) to their own shapes: REST
answers their status, GraphQL's `createOrder` reports them in `userErrors`.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import structlog
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic.alias_generators import to_camel, to_snake
from servicekit.events import record_event
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from commerce_content.errors import (
    CheckoutError,
    InsufficientStock,
    InvalidAddress,
    ProductUnavailable,
)
from commerce_content.events import ORDER_CREATED, OrderSummary
from commerce_content.models import Order, OrderItem, OrderStatus, Product
from commerce_content.orders.stock import quantities, reserve
from commerce_content.payments.provider import CheckoutRequest, LineItem, PaymentProvider
from commerce_content.settings import Settings
from commerce_content.text_rules import has_control_characters

logger = structlog.get_logger(__name__)


def _as_spelled(loc: tuple[int | str, ...], raw: Any) -> str:
    """An address error's field as the client wrote it: errors name fields by their camelCase
    alias, so a field sent in snake_case is named back in snake_case."""
    field = str(loc[0]) if loc else ""
    name = to_snake(field)
    if isinstance(raw, dict) and field not in raw and name in raw:
        field = name
    return ".".join([field, *(str(part) for part in loc[1:])])


class ShippingAddress(BaseModel):
    """Our decision where the spec says "not shown": a postal address, country as ISO 3166-1
    alpha-2. Fields in camelCase like the rest of the checkout body (`postalCode`), or in
    snake_case; stored in snake_case."""

    model_config = ConfigDict(
        extra="forbid", alias_generator=to_camel, validate_by_alias=True, validate_by_name=True
    )

    name: str = Field(min_length=1, max_length=200)
    line1: str = Field(min_length=1, max_length=300)
    line2: str | None = Field(default=None, max_length=300)
    city: str = Field(min_length=1, max_length=200)
    postal_code: str = Field(min_length=1, max_length=20)
    state: str | None = Field(default=None, max_length=100)
    country: str = Field(pattern=r"^[A-Z]{2}$")

    @field_validator("*")
    @classmethod
    def _printable(cls, value: str | None) -> str | None:
        if value is not None and has_control_characters(value):
            raise ValueError("must not contain control characters")
        return value


# Product ids are ASCII digits within the column's range (a larger one names no product).
_PRODUCT_ID = re.compile(r"\s*[0-9]{1,20}\s*")
MAX_PRODUCT_ID = 2**31 - 1
# More than any one order of a shop holds; keeps sums within the stock column's range.
MAX_QUANTITY = 1_000_000
MAX_EMAIL_LENGTH = 320


@dataclass(frozen=True)
class CartLine:
    product_id: str
    quantity: Any


@dataclass(frozen=True)
class CheckoutResult:
    order: Order
    payment_url: str


def unit_price(product: Product) -> Decimal:
    return product.sale_price if product.sale_price is not None else product.base_price


class CheckoutService:
    def __init__(
        self, session: AsyncSession, settings: Settings, provider: PaymentProvider
    ) -> None:
        self.session = session
        self.settings = settings
        self.provider = provider

    async def checkout(
        self,
        lines: list[CartLine],
        customer_email: Any,
        shipping_address: Any,
        user_id: int | None = None,
    ) -> CheckoutResult:
        if not lines:
            raise CheckoutError("items must not be empty", field=("items",))
        if customer_email is not None and (
            not isinstance(customer_email, str)
            or "@" not in customer_email
            or len(customer_email) > MAX_EMAIL_LENGTH
        ):
            raise CheckoutError("customerEmail is not a valid address", field=("customerEmail",))
        if customer_email is not None and has_control_characters(customer_email):
            # REST and GraphQL alike: it would reach the provider and PostgreSQL (NUL).
            raise CheckoutError(
                "customerEmail must not contain control characters",
                field=("customerEmail",),
            )
        address = self._address(shipping_address)
        products = await self._products(lines)
        now = datetime.now(UTC)
        expires_at = now + timedelta(minutes=self.settings.checkout_expiry_minutes)
        order = Order(
            id=uuid.uuid4(),
            status=OrderStatus.PENDING,
            total=Decimal("0.00"),
            currency=self.settings.currency.upper(),
            customer_email=customer_email,
            shipping_address=address,
            user_id=user_id,
            stock_reserved_at=now,
            expires_at=expires_at,
        )
        items: list[OrderItem] = []
        for index, line in enumerate(lines):
            product = products[index]
            price = unit_price(product)
            items.append(
                OrderItem(
                    order_id=order.id,
                    product_id=product.id,
                    name=product.name,
                    price=price,
                    quantity=int(line.quantity),
                )
            )
        order.total = sum((item.price * item.quantity for item in items), Decimal("0.00"))
        base = self.settings.frontend_url.rstrip("/")
        # A decline is the provider's PaymentDeclined, a CheckoutError like the others.
        session = await self.provider.create_session(
            CheckoutRequest(
                order_id=str(order.id),
                currency=self.settings.currency.lower(),
                lines=[LineItem(i.name, i.price, i.quantity) for i in items],
                success_url=f"{base}/checkout/success?order={order.id}",
                cancel_url=f"{base}/checkout/cancel?order={order.id}",
                customer_email=customer_email,
                expires_at=expires_at,
            )
        )
        # Checked above without a lock; taken here for real, so of two buyers of the last
        # items the second is told (and whatever was taken rolls back with the transaction).
        short = await reserve(self.session, quantities((i.product_id, i.quantity) for i in items))
        if short is not None:
            await self.provider.expire_session(session.id)
            index = next(n for n, p in enumerate(products) if p.id == short)
            raise InsufficientStock(
                f"items[{index}]: not enough of '{products[index].name}' in stock any more",
                field=("items", str(index), "quantity"),
            )
        order.payment_session_id = session.id
        order.payment_url = session.url
        self.session.add(order)
        for item in items:
            self.session.add(item)
        await self.session.flush()
        await record_event(self.session, ORDER_CREATED, OrderSummary.of(order))
        logger.info("checkout created", order_id=str(order.id), payment_session_id=session.id)
        return CheckoutResult(order, session.url)

    def _address(self, raw: Any) -> dict[str, Any] | None:
        if raw is None:
            return None
        try:
            return ShippingAddress.model_validate(raw).model_dump(exclude_none=True)
        except ValidationError as exc:
            fields = sorted({_as_spelled(e["loc"], raw) for e in exc.errors()})
            raise InvalidAddress(
                f"shippingAddress is invalid: {', '.join(fields) or 'not an object'}",
                field=("shippingAddress",),
            ) from exc

    async def _products(self, lines: list[CartLine]) -> list[Product]:
        ids: list[int] = []
        for index, line in enumerate(lines):
            where = ("items", str(index))
            if not isinstance(line.product_id, str) or not _PRODUCT_ID.fullmatch(line.product_id):
                raise CheckoutError(
                    f"items[{index}].productId must be a product id string (digits)",
                    field=(*where, "productId"),
                )
            quantity = line.quantity
            if (
                isinstance(quantity, bool)
                or not isinstance(quantity, int)
                or not 1 <= quantity <= MAX_QUANTITY
            ):
                raise CheckoutError(
                    f"items[{index}].quantity must be a whole number from 1 to {MAX_QUANTITY}",
                    field=(*where, "quantity"),
                )
            ids.append(int(line.product_id))
        known = [i for i in ids if i <= MAX_PRODUCT_ID]
        found = {
            p.id: p
            for p in (
                await self.session.exec(select(Product).where(col(Product.id).in_(known)))
            ).all()
        }
        products = []
        wanted: dict[int, int] = {}
        for index, (line, product_id) in enumerate(zip(lines, ids, strict=True)):
            product = found.get(product_id)
            if product is None or not product.published or product.deleted:
                raise ProductUnavailable(
                    f"items[{index}]: product {line.product_id} is not available",
                    field=("items", str(index), "productId"),
                )
            wanted[product_id] = wanted.get(product_id, 0) + int(line.quantity)
            if wanted[product_id] > product.stock:
                raise InsufficientStock(
                    f"items[{index}]: only {product.stock} of '{product.name}' in stock",
                    field=("items", str(index), "quantity"),
                )
            products.append(product)
        return products
