"""Wire shapes of the content API and of its admin side."""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator
from servicekit.web.params import MAX_DB_INT

from commerce_content.articles.schemas import SLUG
from commerce_content.models import Product
from commerce_content.orders.checkout import unit_price


class ProductItem(BaseModel):
    id: int
    title: str
    slug: str
    description: str
    price: float = Field(description="The current price (sale price when set), 2 decimals")
    image: str
    url: str = Field(description="The product's absolute address on the storefront")

    @classmethod
    def of(cls, product: Product, frontend_url: str) -> ProductItem:
        return cls(
            id=product.id,
            title=product.name,
            slug=product.slug,
            description=product.description,
            # JSON has numbers, not decimals; two decimal places survive a float exactly enough.
            price=float(unit_price(product)),
            image=product.image,
            url=f"{frontend_url.rstrip('/')}/products/{product.slug}",
        )


class SearchItem(BaseModel):
    id: int
    title: str
    price: float


class ProductList(BaseModel):
    total: int
    limit: int
    offset: int
    items: list[ProductItem] | list[SearchItem]


class ProductOne(BaseModel):
    item: ProductItem


# Postgres `integer` columns: beyond them the database fails instead of answering.
Stock = Annotated[int, Field(ge=0, le=MAX_DB_INT)]
MenuIndex = Annotated[int, Field(ge=-MAX_DB_INT - 1, le=MAX_DB_INT)]
# The column is varchar(100); constrained text is also checked to be valid Unicode (no lone
# surrogates), which plain `list[str]` items are not.
ProductTag = Annotated[str, StringConstraints(max_length=100)]


class ContentItemWrite(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=300)
    slug: str = Field(min_length=1, max_length=300, pattern=SLUG.pattern)
    description: str = Field(default="", max_length=20_000)
    base_price: Decimal = Field(ge=0, max_digits=12, decimal_places=2)
    sale_price: Decimal | None = Field(default=None, ge=0, max_digits=12, decimal_places=2)
    stock: Stock = 0
    image: str = Field(default="", max_length=2048)
    tags: list[ProductTag] = Field(default_factory=list, max_length=50)
    menu_index: MenuIndex = 0
    published: bool = False


class ContentItemPatch(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(default=None, min_length=1, max_length=300)
    slug: str | None = Field(default=None, min_length=1, max_length=300, pattern=SLUG.pattern)
    description: str | None = Field(default=None, max_length=20_000)
    base_price: Decimal | None = Field(default=None, ge=0, max_digits=12, decimal_places=2)
    sale_price: Decimal | None = Field(default=None, ge=0, max_digits=12, decimal_places=2)
    stock: Stock | None = None
    image: str | None = Field(default=None, max_length=2048)
    tags: list[ProductTag] | None = Field(default=None, max_length=50)
    menu_index: MenuIndex | None = None
    published: bool | None = None
    deleted: bool | None = None

    @field_validator(
        "name",
        "slug",
        "description",
        "base_price",
        "stock",
        "image",
        "tags",
        "menu_index",
        "published",
        "deleted",
    )
    @classmethod
    def _not_null(cls, value: object) -> object:
        # Runs for given fields only: null clears the sale price, and nothing else.
        if value is None:
            raise ValueError("may not be null; omit the field to keep its value")
        return value


class ContentItemSaved(BaseModel):
    id: int
    alias: str
    published: bool
    deleted: bool
