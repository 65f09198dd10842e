"""Test data for commerce-content."""

from __future__ import annotations

import uuid

from commerce_content.identity.dependencies import jwt_codec
from commerce_content.settings import Settings
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine


async def make_user(engine: AsyncEngine, role: str = "user", name: str | None = None) -> int:
    async with engine.begin() as conn:
        user_id = await conn.scalar(
            text(
                "INSERT INTO users (email, name, role, created_at)"
                " VALUES (:email, :name, :role, now()) RETURNING id"
            ),
            {"email": f"{uuid.uuid4().hex[:10]}@example.com", "name": name or "Ada", "role": role},
        )
    return int(user_id)


def bearer_for(settings: Settings, user_id: int, role: str) -> dict[str, str]:
    token = jwt_codec(settings).issue(str(user_id), {"role": role})
    return {"Authorization": f"Bearer {token}"}


def article_body(**overrides: object) -> dict[str, object]:
    body: dict[str, object] = {
        "title": f"Article {uuid.uuid4().hex[:8]}",
        "body": "Text of the article.",
        "status": "published",
        "tags": ["news"],
    }
    body.update(overrides)
    return body


async def make_product(
    engine: AsyncEngine,
    *,
    price: str = "19.99",
    sale_price: str | None = None,
    stock: int = 10,
    published: bool = True,
    deleted: bool = False,
    name: str | None = None,
    description: str = "A product",
    tags: list[str] | None = None,
    category_ids: list[int] | None = None,
) -> int:
    async with engine.begin() as conn:
        product_id = await conn.scalar(
            text(
                "INSERT INTO products (name, slug, description, base_price, sale_price, currency,"
                " stock, image, tags, parent_id, menu_index, published, deleted, created_at,"
                " updated_at) VALUES (:name, :slug, :description, :price, :sale, 'USD', :stock,"
                " '', :tags, 1, 0, :published, :deleted, now(), now()) RETURNING id"
            ),
            {
                "name": name or f"Product {uuid.uuid4().hex[:6]}",
                "slug": f"p-{uuid.uuid4().hex[:10]}",
                "price": price,
                "sale": sale_price,
                "stock": stock,
                "published": published,
                "deleted": deleted,
                "description": description,
                "tags": tags or [],
            },
        )
        for category_id in category_ids or []:
            await conn.execute(
                text("INSERT INTO product_categories (product_id, category_id) VALUES (:p, :c)"),
                {"p": product_id, "c": category_id},
            )
    return int(product_id)


async def make_category(engine: AsyncEngine, name: str = "Mugs") -> int:
    async with engine.begin() as conn:
        category_id = await conn.scalar(
            text("INSERT INTO categories (name, slug) VALUES (:name, :slug) RETURNING id"),
            {"name": name, "slug": f"c-{uuid.uuid4().hex[:10]}"},
        )
    return int(category_id)


async def make_variant(
    engine: AsyncEngine, product_id: int, *, price: str | None = None, stock: int = 5
) -> int:
    async with engine.begin() as conn:
        variant_id = await conn.scalar(
            text(
                "INSERT INTO product_variants (product_id, sku, name, price, stock)"
                " VALUES (:product, :sku, :name, :price, :stock) RETURNING id"
            ),
            {
                "product": product_id,
                "sku": f"SKU-{uuid.uuid4().hex[:10]}",
                "name": "Large",
                "price": price,
                "stock": stock,
            },
        )
    return int(variant_id)
