"""What a product is written as: the product content API's bodies (`content_api`), which the
products' service takes."""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator
from servicekit.web.params import MAX_DB_INT

from commerce_content.articles.schemas import SLUG

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
