"""The Query root: `node`, `product`, `products`, `viewer`, and the staff dashboard."""

from __future__ import annotations

import uuid
from decimal import Decimal

import strawberry

from commerce_content.graphql_api.context import Context, GraphQLContext
from commerce_content.graphql_api.directives import CacheControl, CacheControlScope, guarded_field
from commerce_content.graphql_api.errors import bad_input
from commerce_content.graphql_api.ids import GlobalId, InvalidIdentifier, category_key, decode_id
from commerce_content.graphql_api.inputs import PaginationInput, ProductFilter, given
from commerce_content.graphql_api.pagination import (
    ProductConnection,
    product_connection,
)
from commerce_content.graphql_api.types import (
    DashboardStats,
    Node,
    Order,
    Product,
    ProductVariant,
    User,
)
from commerce_content.identity.repository import UserRepository
from commerce_content.identity.roles import Role
from commerce_content.orders.repository import OrderRepository
from commerce_content.products.repository import ProductCriteria, ProductRepository

MAX_FILTER_VALUES = 100


def criteria_of(filter: ProductFilter | None, *, include_unpublished: bool) -> ProductCriteria:
    if filter is None:
        return ProductCriteria(include_unpublished=include_unpublished)
    category_ids, tags = given(filter.category_ids), given(filter.tags)
    for name, values in (("categoryIds", category_ids), ("tags", tags)):
        if values is not None and len(values) > MAX_FILTER_VALUES:
            raise bad_input(f"at most {MAX_FILTER_VALUES} values in `{name}`")
    categories: tuple[int, ...] | None = None
    if category_ids is not None:
        categories = tuple(_category_id(value) for value in category_ids)
    price_min: Decimal | None = given(filter.price_min)
    price_max: Decimal | None = given(filter.price_max)
    if price_min is not None and price_max is not None and price_min > price_max:
        raise bad_input("`priceMin` is above `priceMax`")
    search = (given(filter.search) or "").strip()
    return ProductCriteria(
        category_ids=categories,
        price_min=price_min,
        price_max=price_max,
        in_stock=given(filter.in_stock),
        search=search or None,
        tags=tuple(tags) if tags is not None else None,
        include_unpublished=include_unpublished,
    )


def page_criteria(context: GraphQLContext, filter: ProductFilter | None) -> ProductCriteria:
    """What `products` lists for this caller (managers see drafts, never shared by caches)."""
    drafts = context.sees_drafts
    if drafts:
        context.cache_hints.restrict(scope=CacheControlScope.PRIVATE)
    return criteria_of(given(filter), include_unpublished=drafts)


def _category_id(value: str) -> int:
    try:
        return category_key(value)
    except InvalidIdentifier as exc:
        raise bad_input(f"not a category id: {value!r}") from exc


def _parse(value: str) -> GlobalId:
    try:
        return GlobalId.parse(value)
    except InvalidIdentifier as exc:
        raise bad_input("not a valid global id") from exc


async def _product(info: Context, product_id: int) -> Product | None:
    if info.context.sees_drafts:
        info.context.cache_hints.restrict(scope=CacheControlScope.PRIVATE)
    row = await info.context.products_by_id.load(product_id)
    return Product.of(row, info.context.variants_by_product) if row is not None else None


async def _variant(info: Context, variant_id: int) -> ProductVariant | None:
    async with info.context.db() as session:
        repository = ProductRepository(session)
        variant = (await repository.variants_by_ids([variant_id])).get(variant_id)
    if variant is None:
        return None
    product = await info.context.products_by_id.load(variant.product_id)
    return ProductVariant.of(variant, product) if product is not None else None


async def _order(info: Context, key: str) -> Order | None:
    """Visible to the user who placed it and to shop staff; anyone else is told nothing."""
    caller = info.context.caller
    info.context.cache_hints.restrict(scope=CacheControlScope.PRIVATE)
    try:
        order_id = uuid.UUID(key)
    except ValueError as exc:
        raise bad_input("not a valid global id") from exc
    if caller is None:
        return None
    async with info.context.db() as session:
        row = await OrderRepository(session).get(order_id)
    if row is None:
        return None
    if not caller.role.allows(Role.MANAGER) and (
        caller.user_id is None or row.user_id != caller.user_id
    ):
        return None
    return Order.of(row)


async def _user(info: Context, user_id: int) -> User | None:
    """A user sees their own record; admins see anyone's."""
    caller = info.context.caller
    info.context.cache_hints.restrict(scope=CacheControlScope.PRIVATE)
    if caller is None or not (caller.user_id == user_id or caller.role.allows(Role.ADMIN)):
        return None
    async with info.context.db() as session:
        row = await UserRepository(session).get(user_id)
    return User.of(row) if row is not None else None


@strawberry.type
class Query:
    @guarded_field(description="Any object by its global id; null when it is not visible.")
    async def node(self, info: Context, id: strawberry.ID) -> Node | None:
        parsed = _parse(id)
        try:
            key = parsed.integer_key() if parsed.type_name != "Order" else 0
        except InvalidIdentifier as exc:
            raise bad_input("not a valid global id") from exc
        if parsed.type_name == "Product":
            return await _product(info, key)
        if parsed.type_name == "ProductVariant":
            return await _variant(info, key)
        if parsed.type_name == "Order":
            return await _order(info, parsed.key)
        if parsed.type_name == "User":
            return await _user(info, key)
        return None

    @guarded_field(cache=CacheControl(max_age=60), description="A product by its global id.")
    async def product(self, info: Context, id: strawberry.ID) -> Product | None:
        try:
            product_id = decode_id(id, "Product")
        except InvalidIdentifier as exc:
            raise bad_input("not a Product id") from exc
        return await _product(info, product_id)

    @guarded_field(
        cache=CacheControl(max_age=60),
        description="Products in id order, filtered, a page at a time (at most 100).",
    )
    async def products(
        self,
        info: Context,
        filter: ProductFilter | None = strawberry.UNSET,
        page: PaginationInput | None = strawberry.UNSET,
    ) -> ProductConnection:
        return await product_connection(info, page_criteria(info.context, filter), given(page))

    @guarded_field(
        cache=CacheControl(max_age=30, scope=CacheControlScope.PRIVATE),
        description="The signed-in user; null for anonymous callers and API keys.",
    )
    async def viewer(self, info: Context) -> User | None:
        caller = info.context.caller
        if caller is None or caller.user_id is None:
            return None
        async with info.context.db() as session:
            row = await UserRepository(session).get(caller.user_id)
        return User.of(row) if row is not None else None

    @guarded_field(auth=Role.MANAGER, description="Catalogue and order figures for shop staff.")
    async def dashboard_stats(self, info: Context) -> DashboardStats | None:
        async with info.context.db() as session:
            figures = await OrderRepository(session).stats()
        return DashboardStats.of(figures, info.context.settings.currency)
