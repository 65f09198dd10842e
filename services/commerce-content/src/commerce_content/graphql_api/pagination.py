"""Relay cursor connections over products: `first`/`after` and `last`/`before` as the
Cursor Connections Specification defines them, on a keyset (the product id), so pages stay
stable while products are added."""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import strawberry
from strawberry.types.nodes import SelectedField, Selection

from commerce_content.graphql_api.context import Context, GraphQLContext
from commerce_content.graphql_api.directives import CacheControl, guarded_field
from commerce_content.graphql_api.errors import bad_input
from commerce_content.graphql_api.ids import InvalidIdentifier, decode_cursor, encode_cursor
from commerce_content.graphql_api.inputs import PaginationInput, given
from commerce_content.graphql_api.types import PageInfo, Product, ProductEdge
from commerce_content.models import Product as ProductRow
from commerce_content.products.repository import (
    KeysetWindow,
    ProductCriteria,
    ProductRecord,
    ProductRepository,
    VariantRecord,
)

DEFAULT_PAGE_SIZE = 20
MAX_PAGE_SIZE = 100


@strawberry.type(description="A page of products.", directives=[CacheControl(max_age=60)])
class ProductConnection:
    edges: list[ProductEdge]
    page_info: PageInfo
    criteria: strawberry.Private[ProductCriteria]

    @guarded_field(description="All products matching the filter (counted only when asked).")
    async def total_count(self, info: Context) -> int:
        async with info.context.db() as session:
            return await ProductRepository(session).count(self.criteria)


@dataclass(frozen=True)
class PageRequest:
    window: KeysetWindow

    @classmethod
    def of(cls, page: PaginationInput | None) -> PageRequest:
        page = page or PaginationInput()
        first, last = given(page.first), given(page.last)
        if first is not None and last is not None:
            raise bad_input("Pass either `first` or `last`, not both")
        for name, count in (("first", first), ("last", last)):
            if count is not None and count < 0:
                raise bad_input(f"`{name}` must not be negative")
            if count is not None and count > MAX_PAGE_SIZE:
                raise bad_input(f"`{name}` must be at most {MAX_PAGE_SIZE}")
        after = _position(given(page.after), "after")
        before = _position(given(page.before), "before")
        backwards = last is not None
        limit = last if backwards else first
        return cls(
            KeysetWindow(
                limit=DEFAULT_PAGE_SIZE if limit is None else limit,
                backwards=backwards,
                after_id=after,
                before_id=before,
            )
        )


def _position(cursor: str | None, name: str) -> int | None:
    if cursor is None:
        return None
    try:
        return decode_cursor(cursor)
    except InvalidIdentifier as exc:
        raise bad_input(f"`{name}` is not a cursor of this connection") from exc


def selects_variants(info: Context) -> bool:
    """Whether the operation asks for `edges.node.variants` under this connection."""
    return any(
        _children(product.selections, "variants")
        for connection in info.selected_fields
        for edges in _children(connection.selections, "edges")
        for product in _children(edges.selections, "node")
    )


def _children(selections: list[Selection], name: str) -> list[SelectedField]:
    """The fields called `name` directly in `selections`, looking into fragments."""
    found: list[SelectedField] = []
    for selection in selections:
        if isinstance(selection, SelectedField):
            if selection.name == name:
                found.append(selection)
        else:  # an inline fragment or a fragment spread: strawberry gives its selections
            found.extend(_children(selection.selections, name))
    return found


@dataclass(frozen=True)
class ProductPage:
    """A page's rows as read: its products, their variants when asked for, and whether
    there are more on either side."""

    rows: list[ProductRow] | list[ProductRecord]
    variants: dict[int, list[VariantRecord]] | None
    has_next: bool
    has_previous: bool


async def load_product_page(
    context: GraphQLContext,
    criteria: ProductCriteria,
    page: PaginationInput | None,
    *,
    with_variants: bool,
    records: bool = False,
) -> ProductPage:
    """The page's rows (and every variant of the page in one query, when asked for); as
    plain `ProductRecord`s with `records` (read in one round trip), else as models."""
    request = PageRequest.of(page)
    window = request.window
    async with context.db() as session:
        repository = ProductRepository(session)
        rows: list[ProductRow] | list[ProductRecord]
        grouped: dict[int, list[VariantRecord]] | None
        if records:
            rows, grouped = await repository.page_records(
                criteria, window, with_variants=with_variants
            )
        else:
            rows = await repository.page(criteria, window)
            grouped = None
        more = len(rows) > window.limit
        rows = rows[: window.limit]
        if window.backwards:
            rows.reverse()
        # What lies beyond the cursors the client sent, so both flags are right at both ends.
        if window.after_id is not None or window.before_id is not None:
            before_after, beyond_before = await repository.exists_beyond(
                criteria, at_or_below=window.after_id, at_or_above=window.before_id
            )
        else:
            before_after = beyond_before = False
        if with_variants and not records:
            grouped = await repository.variants_of([row.id for row in rows])
    return ProductPage(
        rows=rows,
        variants=grouped,
        has_next=beyond_before or (more and not window.backwards),
        has_previous=before_after or (more and window.backwards),
    )


async def product_connection(
    info: Context, criteria: ProductCriteria, page: PaginationInput | None
) -> ProductConnection:
    loaded = await load_product_page(
        info.context, criteria, page, with_variants=selects_variants(info)
    )
    rows, grouped = cast("list[ProductRow]", loaded.rows), loaded.variants
    if grouped is not None:
        edges = [
            ProductEdge(node=Product.of(row, grouped.get(row.id, [])), cursor=encode_cursor(row.id))
            for row in rows
        ]
    else:
        loader = info.context.variants_by_product
        edges = [
            ProductEdge(node=Product.of(row, loader), cursor=encode_cursor(row.id)) for row in rows
        ]
    return ProductConnection(
        edges=edges,
        page_info=PageInfo(
            has_next_page=loaded.has_next,
            has_previous_page=loaded.has_previous,
            start_cursor=edges[0].cursor if edges else None,
            end_cursor=edges[-1].cursor if edges else None,
        ),
        criteria=criteria,
    )
