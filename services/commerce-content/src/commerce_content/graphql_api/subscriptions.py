"""GraphQL subscriptions, fed by the process's `EventBroker` (live.py), never by polling.

Each resolver checks everything at subscribe time (role, rate limit, the order's visibility)
and only then returns its stream, so a refusal is the protocol's `error` message for that
subscription rather than a stream that never yields.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import ExitStack
from typing import Any, TypeVar, cast

import strawberry
from graphql import GraphQLError

from commerce_content.graphql_api.context import Context, GraphQLContext
from commerce_content.graphql_api.directives import (
    Auth,
    Errors,
    RateLimit,
    check_role,
    rate_limit_item,
)
from commerce_content.graphql_api.errors import bad_input
from commerce_content.graphql_api.ids import GlobalId, InvalidIdentifier, decode_id, global_id
from commerce_content.graphql_api.live import EventBroker, Listener, OrderEvent, StockLevel
from commerce_content.graphql_api.types import Order
from commerce_content.identity.roles import Role
from commerce_content.models import Order as OrderRow
from commerce_content.orders.repository import OrderRepository

# Subscribing is an operation like a query: at most this many per caller and window.
SUBSCRIBE_LIMIT = (30, "1m")
_SUBSCRIBE_ITEM = rate_limit_item(*SUBSCRIBE_LIMIT)


ResolverT = TypeVar("ResolverT", bound=Callable[..., Any])


def subscription(role: Role, description: str) -> Callable[[ResolverT], ResolverT]:
    """A subscription field with its `@auth` and `@rateLimit` in the SDL; the resolver
    enforces both at subscribe time (`_admit`)."""
    field: Any = strawberry.subscription(
        description=description,
        directives=[
            Auth(requires=role),
            RateLimit(max=SUBSCRIBE_LIMIT[0], window=SUBSCRIBE_LIMIT[1]),
        ],
    )
    return cast("Callable[[ResolverT], ResolverT]", field)


@strawberry.type(description="A product's stock after a change (shop staff only).")
class StockChange:
    product_id: strawberry.ID = strawberry.field(description="The product's global id.")
    stock: int = strawberry.field(description="Units left for sale.")
    in_stock: bool


async def _admit(info: Context, field: str, role: Role) -> tuple[GraphQLContext, EventBroker]:
    context = info.context
    check_role(context.viewer_role, role)
    await context.field_limiter.hit(_SUBSCRIBE_ITEM, f"gql:Subscription.{field}:{context.rate_key}")
    if context.broker is None:
        raise GraphQLError("Subscriptions run over WebSocket only")
    return context, context.broker


def _visible(context: GraphQLContext, row: OrderRow | None) -> bool:
    caller = context.caller
    if row is None or caller is None:
        return False
    return caller.role.allows(Role.MANAGER) or (
        caller.user_id is not None and row.user_id == caller.user_id
    )


async def _read_order(context: GraphQLContext, order_id: uuid.UUID) -> OrderRow | None:
    async with context.db() as session:
        return await OrderRepository(session).get(order_id)


async def _order_updates(
    context: GraphQLContext,
    registration: ExitStack,
    listener: Listener[OrderEvent],
    row: OrderRow,
) -> AsyncIterator[Order]:
    with registration:
        yield Order.of(row)
        last = row.status
        async for _ in listener.items():
            now = await _read_order(context, row.id)
            if now is None:
                return
            if now.status != last:
                last = now.status
                yield Order.of(now)


async def _stock_updates(
    registration: ExitStack, listener: Listener[StockLevel], products: set[int] | None
) -> AsyncIterator[StockChange]:
    with registration:
        async for level in listener.items():
            if products is not None and level.product_id not in products:
                continue
            yield StockChange(
                product_id=strawberry.ID(global_id("Product", level.product_id)),
                stock=level.stock,
                in_stock=level.stock > 0,
            )


@strawberry.type
class Subscription:
    @subscription(
        Role.USER,
        "The order as it is now, then again each time its status changes. For the customer"
        " who placed it and shop staff; anyone else is refused.",
    )
    async def order_status_changed(
        self, info: Context, order_id: strawberry.ID
    ) -> AsyncIterator[Order]:
        context, broker = await _admit(info, "orderStatusChanged", Role.USER)
        try:
            parsed = GlobalId.parse(order_id)
            if parsed.type_name != "Order":
                raise InvalidIdentifier(order_id)
            key = uuid.UUID(parsed.key)
        except (InvalidIdentifier, ValueError) as exc:
            raise bad_input("not an Order id") from exc
        registration = ExitStack()
        # Listening before the first read: a change between the two is not missed.
        listener = registration.enter_context(broker.order(key))
        try:
            row = await _read_order(context, key)
            if not _visible(context, row):
                # Missing or another's: the same answer, which tells nothing about others.
                raise GraphQLError(
                    "No order with this id is visible to you",
                    extensions={"code": Errors.FORBIDDEN},
                )
        except BaseException:
            registration.close()
            raise
        assert row is not None
        return _order_updates(context, registration, listener, row)

    @subscription(
        Role.MANAGER,
        "Stock levels as orders and product saves change them: every product, or those of"
        " `productIds`. Managers and admins only.",
    )
    async def stock_changed(
        self, info: Context, product_ids: list[strawberry.ID] | None = None
    ) -> AsyncIterator[StockChange]:
        _, broker = await _admit(info, "stockChanged", Role.MANAGER)
        products: set[int] | None = None
        if product_ids is not None:
            try:
                products = {decode_id(value, "Product") for value in product_ids}
            except InvalidIdentifier as exc:
                raise bad_input("not a Product id") from exc
        registration = ExitStack()
        listener = registration.enter_context(broker.stock())
        return _stock_updates(registration, listener, products)
