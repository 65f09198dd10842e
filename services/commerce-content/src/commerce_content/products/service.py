"""The rules of saving a product, shared by the content API and GraphQL's product mutations.

Services never commit: the caller's transaction holds the change and its outbox event, and the
caller sends the content-saved notification once that transaction has committed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import ValidationError
from servicekit.events import record_event
from servicekit.paging import Page, page_of
from sqlmodel.ext.asyncio.session import AsyncSession

from commerce_content.errors import (
    DuplicateSlug,
    InvalidProduct,
    InvalidProductField,
    ProductError,
    ProductNotFound,
    UnknownCategory,
)
from commerce_content.events import CONTENT_CREATED, CONTENT_UPDATED, ContentSaved
from commerce_content.models import Product
from commerce_content.products.repository import (
    KeysetWindow,
    ProductCriteria,
    ProductRepository,
    VariantRecord,
)
from commerce_content.products.schemas import ContentItemPatch, ContentItemWrite
from commerce_content.settings import Settings

SaveKind = Literal["created", "updated"]


@dataclass(frozen=True)
class SavedProduct:
    product: Product
    kind: SaveKind


def problems_of(error: ValidationError) -> list[ProductError]:
    return [
        InvalidProductField(str(detail["msg"]), field=tuple(str(part) for part in detail["loc"]))
        for detail in error.errors()
    ]


@dataclass(frozen=True)
class CatalogPage:
    total: int
    products: list[Product]


class ProductService:
    def __init__(self, session: AsyncSession, settings: Settings) -> None:
        self.session = session
        self.settings = settings
        self.products = ProductRepository(session)

    async def create(
        self, values: dict[str, Any], category_ids: list[int] | None = None
    ) -> SavedProduct:
        try:
            checked = ContentItemWrite.model_validate(values)
        except ValidationError as exc:
            raise InvalidProduct(problems_of(exc)) from exc
        product = Product(
            **checked.model_dump(),
            parent_id=self.settings.catalog_parent_id,
            currency=self.settings.currency.upper(),
        )
        await self._check_categories(category_ids)
        saved = await self.save(product, "created")
        if category_ids is not None:
            await self.products.set_categories(product.id, category_ids)
        return saved

    async def update(
        self, product_id: int, changes: dict[str, Any], category_ids: list[int] | None = None
    ) -> SavedProduct:
        try:
            checked = ContentItemPatch.model_validate(changes)
        except ValidationError as exc:
            raise InvalidProduct(problems_of(exc)) from exc
        product = await self._existing(product_id)
        # Only a sale price may be null (it clears it): ContentItemPatch refuses other nulls.
        for field, value in checked.model_dump(exclude_unset=True).items():
            setattr(product, field, value)
        await self._check_categories(category_ids)
        if category_ids is not None:
            await self.products.set_categories(product_id, category_ids)
        return await self.save(product, "updated")

    async def catalog(self, offset: int, limit: int, search: str) -> CatalogPage:
        """The content API's list: published children of the catalogue parent in menu order;
        `search` narrows to titles containing it."""
        parent = self.settings.catalog_parent_id
        total = await self.products.catalog_count(parent, search)
        rows = await self.products.catalog_page(parent, search, offset, limit)
        return CatalogPage(total, rows)

    async def catalog_item(self, product_id: int) -> Product:
        product = await self.products.catalog_item(self.settings.catalog_parent_id, product_id)
        if product is None:
            raise ProductNotFound("Not found")
        return product

    async def page(
        self, criteria: ProductCriteria, limit: int, after_id: int | None, with_variants: bool
    ) -> tuple[Page[Product], dict[int, list[VariantRecord]] | None]:
        """A keyset page by id for the resource API, with the variants when asked for."""
        rows = await self.products.page(criteria, KeysetWindow(limit=limit, after_id=after_id))
        page = page_of(rows, limit, lambda p: str(p.id))
        variants = (
            await self.products.variants_of([p.id for p in page.items]) if with_variants else None
        )
        return page, variants

    async def set_published(self, product_id: int, published: bool) -> SavedProduct:
        product = await self._existing(product_id)
        product.published = published
        return await self.save(product, "updated")

    async def delete(self, product_id: int) -> SavedProduct:
        """Soft delete: orders keep pointing at the row; a deleted product is unpublished."""
        product = await self._existing(product_id)
        product.deleted = True
        product.published = False
        return await self.save(product, "updated")

    async def save(self, product: Product, kind: SaveKind) -> SavedProduct:
        if await self.products.slug_taken(product.slug, product.id):
            raise DuplicateSlug(f"The alias '{product.slug}' is already used", field=("slug",))
        product.updated_at = datetime.now(UTC)
        self.session.add(product)
        await self.session.flush()
        await record_event(
            self.session,
            CONTENT_CREATED if kind == "created" else CONTENT_UPDATED,
            ContentSaved(
                event=kind, id=product.id, alias=product.slug, published=product.published
            ),
        )
        return SavedProduct(product, kind)

    async def _existing(self, product_id: int) -> Product:
        product = await self.products.get(product_id)
        if product is None:
            raise ProductNotFound("No such product", field=("id",))
        return product

    async def _check_categories(self, category_ids: list[int] | None) -> None:
        if not category_ids:
            return
        missing = await self.products.missing_categories(category_ids)
        if missing:
            raise UnknownCategory(
                f"Unknown categories: {', '.join(map(str, missing))}", field=("categoryIds",)
            )
