"""The schema's input types. Optional fields default to UNSET (no default in the SDL);
`given` turns an absent value into None for the code behind."""

from __future__ import annotations

from decimal import Decimal
from typing import TypeVar

import strawberry
from strawberry.types.unset import UnsetType

T = TypeVar("T")


def given(value: T | UnsetType | None) -> T | None:
    return None if isinstance(value, UnsetType) else value


@strawberry.input(description="Relay paging: `first` with `after`, or `last` with `before`.")
class PaginationInput:
    first: int | None = strawberry.UNSET
    after: str | None = strawberry.UNSET
    last: int | None = strawberry.UNSET
    before: str | None = strawberry.UNSET


@strawberry.input(description="Criteria that all hold together; omitted ones do not filter.")
class ProductFilter:
    category_ids: list[strawberry.ID] | None = strawberry.field(
        default=strawberry.UNSET, description="Products in any of these categories (database ids)."
    )
    price_min: Decimal | None = strawberry.field(
        default=strawberry.UNSET,
        description="Current price (the sale price when set) at least this.",
    )
    price_max: Decimal | None = strawberry.field(
        default=strawberry.UNSET, description="Current price at most this."
    )
    in_stock: bool | None = strawberry.UNSET
    search: str | None = strawberry.field(
        default=strawberry.UNSET, description="Text in the name or description, case-insensitive."
    )
    tags: list[str] | None = strawberry.field(
        default=strawberry.UNSET, description="Products carrying any of these tags."
    )


@strawberry.input(description="One product and how many of it.")
class OrderLineInput:
    product_id: strawberry.ID
    quantity: int


@strawberry.input(description='A postal address; `country` is ISO 3166-1 alpha-2 ("DE").')
class AddressInput:
    name: str
    line1: str
    line2: str | None = strawberry.UNSET
    city: str
    postal_code: str
    state: str | None = strawberry.UNSET
    country: str


@strawberry.input
class CreateOrderInput:
    items: list[OrderLineInput]
    customer_email: str | None = strawberry.UNSET
    shipping_address: AddressInput | None = strawberry.UNSET


@strawberry.input(description="A new product; it stays a draft until published.")
class ProductCreateInput:
    name: str
    slug: str
    base_price: Decimal
    description: str = ""
    sale_price: Decimal | None = strawberry.UNSET
    stock: int = 0
    image: str = ""
    tags: list[str] = strawberry.field(default_factory=list)
    menu_index: int = 0
    published: bool = False
    category_ids: list[strawberry.ID] | None = strawberry.UNSET


@strawberry.input(description="Changes to a product; omitted fields keep their value.")
class ProductUpdateInput:
    name: str | None = strawberry.UNSET
    slug: str | None = strawberry.UNSET
    description: str | None = strawberry.UNSET
    base_price: Decimal | None = strawberry.UNSET
    sale_price: Decimal | None = strawberry.field(
        default=strawberry.UNSET, description="null removes the sale price."
    )
    stock: int | None = strawberry.UNSET
    image: str | None = strawberry.UNSET
    tags: list[str] | None = strawberry.UNSET
    menu_index: int | None = strawberry.UNSET
    category_ids: list[strawberry.ID] | None = strawberry.UNSET
