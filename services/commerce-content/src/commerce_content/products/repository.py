"""Product queries: filtered keyset pages, counts, batched look-ups for DataLoaders."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, NamedTuple

import sqlalchemy as sa
from servicekit.db.like import contains_pattern
from sqlalchemy import ColumnElement, and_, delete, exists, func, or_, true
from sqlalchemy.dialects.postgresql import ARRAY
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession
from sqlmodel.sql.expression import SelectOfScalar

from commerce_content.models import Category, Product, ProductCategory, ProductVariant


@dataclass(frozen=True)
class ProductCriteria:
    """Every given criterion must hold (they combine with AND)."""

    category_ids: tuple[int, ...] | None = None
    price_min: Decimal | None = None
    price_max: Decimal | None = None
    in_stock: bool | None = None
    search: str | None = None
    tags: tuple[str, ...] | None = None
    # Shoppers see published products only; managers also see drafts.
    include_unpublished: bool = False


def effective_price() -> ColumnElement[Any]:
    """What the customer pays: the sale price when there is one."""
    return func.coalesce(col(Product.sale_price), col(Product.base_price))


def _conditions(criteria: ProductCriteria) -> list[ColumnElement[bool]]:
    conditions: list[ColumnElement[bool]] = [col(Product.deleted).is_(False)]
    if not criteria.include_unpublished:
        conditions.append(col(Product.published).is_(True))
    if criteria.category_ids is not None:
        conditions.append(
            exists().where(
                col(ProductCategory.product_id) == col(Product.id),
                col(ProductCategory.category_id).in_(criteria.category_ids),
            )
        )
    if criteria.price_min is not None:
        conditions.append(effective_price() >= criteria.price_min)
    if criteria.price_max is not None:
        conditions.append(effective_price() <= criteria.price_max)
    if criteria.in_stock is True:
        conditions.append(col(Product.stock) > 0)
    elif criteria.in_stock is False:
        conditions.append(col(Product.stock) <= 0)
    if criteria.search:
        pattern = contains_pattern(criteria.search)
        conditions.append(
            or_(
                col(Product.name).ilike(pattern, escape="\\"),
                col(Product.description).ilike(pattern, escape="\\"),
            )
        )
    if criteria.tags is not None:
        # Any of the given tags (a facet's values widen it; other criteria narrow).
        conditions.append(
            col(Product.tags).op("&&")(sa.cast(list(criteria.tags), ARRAY(sa.String())))
        )
    return conditions


class VariantRecord(NamedTuple):
    """A variant as readers need it: plain values, no ORM bookkeeping (pages hold hundreds)."""

    id: int
    product_id: int
    sku: str
    name: str
    price: Decimal | None
    stock: int


VARIANT_COLUMNS = (
    col(ProductVariant.id),
    col(ProductVariant.product_id),
    col(ProductVariant.sku),
    col(ProductVariant.name),
    col(ProductVariant.price),
    col(ProductVariant.stock),
)


class ProductRecord(NamedTuple):
    """What a page of products shows of each (GraphQL's direct pages): plain values."""

    id: int
    name: str
    base_price: Decimal
    sale_price: Decimal | None
    currency: str


PRODUCT_RECORD_COLUMNS = (
    col(Product.id),
    col(Product.name),
    col(Product.base_price),
    col(Product.sale_price),
    col(Product.currency),
)


@dataclass(frozen=True)
class KeysetWindow:
    """Ids strictly between `after_id` and `before_id`, `limit` of them from the start
    (forwards) or from the end (backwards)."""

    limit: int
    backwards: bool = False
    after_id: int | None = None
    before_id: int | None = None


class ProductRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def page(self, criteria: ProductCriteria, window: KeysetWindow) -> list[Product]:
        """At most `limit + 1` products in id order: the extra one says whether there are more."""
        query = select(Product).where(*_conditions(criteria))
        if window.after_id is not None:
            query = query.where(col(Product.id) > window.after_id)
        if window.before_id is not None:
            query = query.where(col(Product.id) < window.before_id)
        order = col(Product.id).desc() if window.backwards else col(Product.id).asc()
        return list((await self.session.exec(query.order_by(order).limit(window.limit + 1))).all())

    async def page_records(
        self, criteria: ProductCriteria, window: KeysetWindow, *, with_variants: bool
    ) -> tuple[list[ProductRecord], dict[int, list[VariantRecord]] | None]:
        """`page` as plain records, with every variant of the page (in id order) when asked
        for, in one round trip: the page is a CTE the variants are joined to."""
        query = sa.select(*PRODUCT_RECORD_COLUMNS).where(*_conditions(criteria))
        if window.after_id is not None:
            query = query.where(col(Product.id) > window.after_id)
        if window.before_id is not None:
            query = query.where(col(Product.id) < window.before_id)
        order = col(Product.id).desc() if window.backwards else col(Product.id).asc()
        query = query.order_by(order).limit(window.limit + 1)
        if not with_variants:
            return [ProductRecord(*row) for row in await self._rows(query)], None
        page = query.cte("page")
        page_order = page.c.id.desc() if window.backwards else page.c.id.asc()
        joined = (
            sa.select(page, *VARIANT_COLUMNS)
            .select_from(
                page.outerjoin(ProductVariant, col(ProductVariant.product_id) == page.c.id)
            )
            .order_by(page_order, col(ProductVariant.id))
        )
        products: list[ProductRecord] = []
        grouped: dict[int, list[VariantRecord]] = {}
        width = len(PRODUCT_RECORD_COLUMNS)
        for row in await self._rows(joined):
            product_id = row[0]
            variants = grouped.get(product_id)
            if variants is None:
                products.append(ProductRecord(*row[:width]))
                variants = grouped[product_id] = []
            if row[width] is not None:  # a product without variants joins to nulls
                variants.append(VariantRecord(*row[width:]))
        return products, grouped

    async def exists_beyond(
        self, criteria: ProductCriteria, *, at_or_below: int | None, at_or_above: int | None
    ) -> tuple[bool, bool]:
        """Whether matching products exist with id <= `at_or_below` and with id >=
        `at_or_above`: what lies outside the cursors, in one round trip."""
        base = and_(*_conditions(criteria))

        def side(condition: ColumnElement[bool] | None) -> ColumnElement[bool]:
            if condition is None:
                return ~true()
            return exists().where(base, condition)

        below = side(col(Product.id) <= at_or_below if at_or_below is not None else None)
        above = side(col(Product.id) >= at_or_above if at_or_above is not None else None)
        row = (await self.session.exec(select(below, above))).one()
        return bool(row[0]), bool(row[1])

    async def count(self, criteria: ProductCriteria) -> int:
        query = select(func.count()).select_from(Product).where(*_conditions(criteria))
        return int((await self.session.exec(query)).one())

    async def by_ids(self, ids: Sequence[int], *, include_unpublished: bool) -> dict[int, Product]:
        query = select(Product).where(col(Product.id).in_(ids), col(Product.deleted).is_(False))
        if not include_unpublished:
            query = query.where(col(Product.published).is_(True))
        return {p.id: p for p in (await self.session.exec(query)).all()}

    async def variants_of(self, product_ids: Sequence[int]) -> dict[int, list[VariantRecord]]:
        query = (
            sa.select(*VARIANT_COLUMNS)
            .where(col(ProductVariant.product_id).in_(product_ids))
            .order_by(col(ProductVariant.id))
        )
        grouped: dict[int, list[VariantRecord]] = defaultdict(list)
        for row in await self._rows(query):
            variant = VariantRecord(*row)
            grouped[variant.product_id].append(variant)
        return grouped

    async def variants_by_ids(self, ids: Sequence[int]) -> dict[int, VariantRecord]:
        query = sa.select(*VARIANT_COLUMNS).where(col(ProductVariant.id).in_(ids))
        return {row[0]: VariantRecord(*row) for row in await self._rows(query)}

    async def _rows(self, query: sa.Executable) -> list[tuple[Any, ...]]:
        """Plain rows through the session's connection (same transaction, no ORM objects)."""
        connection = await self.session.connection()
        return [tuple(row) for row in await connection.execute(query)]

    async def get(self, product_id: int) -> Product | None:
        product = await self.session.get(Product, product_id)
        if product is None or product.deleted:
            return None
        return product

    async def slug_taken(self, slug: str, except_id: int | None) -> bool:
        query = select(Product.id).where(Product.slug == slug)
        if except_id is not None:
            query = query.where(Product.id != except_id)
        return (await self.session.exec(query)).first() is not None

    async def set_categories(self, product_id: int, category_ids: Sequence[int]) -> None:
        await self.session.execute(
            delete(ProductCategory).where(col(ProductCategory.product_id) == product_id)
        )
        for category_id in dict.fromkeys(category_ids):
            self.session.add(ProductCategory(product_id=product_id, category_id=category_id))

    async def missing_categories(self, category_ids: Sequence[int]) -> list[int]:
        query = select(Category.id).where(col(Category.id).in_(category_ids))
        found = set((await self.session.exec(query)).all())
        return [c for c in category_ids if c not in found]

    def _catalog(self, parent_id: int, search: str) -> SelectOfScalar[Product]:
        query = select(Product).where(
            Product.parent_id == parent_id,
            col(Product.published),
            col(Product.deleted).is_(False),
        )
        if search:
            query = query.where(col(Product.name).ilike(contains_pattern(search), escape="\\"))
        return query

    async def catalog_count(self, parent_id: int, search: str) -> int:
        query = select(func.count()).select_from(self._catalog(parent_id, search).subquery())
        return int((await self.session.exec(query)).one())

    async def catalog_page(
        self, parent_id: int, search: str, offset: int, limit: int
    ) -> list[Product]:
        query = (
            self._catalog(parent_id, search)
            .order_by(col(Product.menu_index), col(Product.id))
            .offset(offset)
            .limit(limit)
        )
        return list((await self.session.exec(query)).all())

    async def catalog_item(self, parent_id: int, product_id: int) -> Product | None:
        query = self._catalog(parent_id, "").where(Product.id == product_id)
        return (await self.session.exec(query)).first()
