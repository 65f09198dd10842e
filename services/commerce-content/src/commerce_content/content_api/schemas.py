"""Wire shapes of the content API and of its admin side."""

from __future__ import annotations

from pydantic import BaseModel, Field

from commerce_content.models import Product
from commerce_content.orders.checkout import unit_price
from commerce_content.products.schemas import ContentItemPatch as ContentItemPatch
from commerce_content.products.schemas import ContentItemWrite as ContentItemWrite


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


class ContentItemSaved(BaseModel):
    id: int
    alias: str
    published: bool
    deleted: bool
