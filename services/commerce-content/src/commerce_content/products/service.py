"""The rules of saving a product, shared by the content API and GraphQL's product mutations.

Services never commit: the caller's transaction holds the change and its outbox event, and the
caller sends the content-saved notification once that transaction has committed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import ValidationError
from servicekit.events import record_event
from sqlmodel.ext.asyncio.session import AsyncSession

from commerce_content.content_api.schemas import ContentItemPatch, ContentItemWrite
from commerce_content.events import CONTENT_CREATED, CONTENT_UPDATED, ContentSaved
from commerce_content.models import Product
from commerce_content.products.repository import ProductRepository
from commerce_content.settings import Settings

SaveKind = Literal["created", "updated"]


class ProductProblemCode(StrEnum):
    NOT_FOUND = "NOT_FOUND"
    DUPLICATE_SLUG = "DUPLICATE_SLUG"
    INVALID = "INVALID"
    UNKNOWN_CATEGORY = "UNKNOWN_CATEGORY"


@dataclass(frozen=True)
class ProductProblem(Exception):
    code: ProductProblemCode
    message: str
    field: tuple[str, ...] = ()


@dataclass(frozen=True)
class SavedProduct:
    product: Product
    kind: SaveKind


def problems_of(error: ValidationError) -> list[ProductProblem]:
    return [
        ProductProblem(
            ProductProblemCode.INVALID,
            str(detail["msg"]),
            tuple(str(part) for part in detail["loc"]),
        )
        for detail in error.errors()
    ]


class InvalidProduct(Exception):
    """Several input problems at once, so a form can show them all."""

    def __init__(self, problems: list[ProductProblem]) -> None:
        super().__init__("; ".join(p.message for p in problems))
        self.problems = problems


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
            assert product.id is not None
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
            raise ProductProblem(
                ProductProblemCode.DUPLICATE_SLUG,
                f"The alias '{product.slug}' is already used",
                ("slug",),
            )
        product.updated_at = datetime.now(UTC)
        self.session.add(product)
        await self.session.flush()
        assert product.id is not None
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
            raise ProductProblem(ProductProblemCode.NOT_FOUND, "No such product", ("id",))
        return product

    async def _check_categories(self, category_ids: list[int] | None) -> None:
        if not category_ids:
            return
        missing = await self.products.missing_categories(category_ids)
        if missing:
            raise ProductProblem(
                ProductProblemCode.UNKNOWN_CATEGORY,
                f"Unknown categories: {', '.join(map(str, missing))}",
                ("categoryIds",),
            )
