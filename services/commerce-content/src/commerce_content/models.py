"""Tables of commerce-content. The foundation tables (API keys, outbox, processed events) come
from servicekit; these are created by the second migration."""

import uuid
from datetime import datetime
from decimal import Decimal
from enum import StrEnum
from typing import Any

import sqlalchemy as sa
from servicekit.db.models import ApiKey, OutboxEvent, ProcessedEvent, utcnow
from sqlalchemy.dialects import postgresql
from sqlmodel import Field, Relationship, SQLModel

metadata = SQLModel.metadata
MONEY = sa.Numeric(12, 2)


class OrderStatus(StrEnum):
    PENDING = "pending"
    PAID = "paid"
    EXPIRED = "expired"


class InquiryStatus(StrEnum):
    NEW = "new"


class ArticleStatus(StrEnum):
    DRAFT = "draft"
    PUBLISHED = "published"
    ARCHIVED = "archived"


def _status(enum: type[StrEnum], default: StrEnum, **kwargs: Any) -> Any:
    """A status column: VARCHAR(16) holding the value (as the migrations made it), read back
    as the enum member; no CHECK constraint, so a new status needs no migration."""
    column_type = sa.Enum(
        enum,
        native_enum=False,
        create_constraint=False,
        length=16,
        values_callable=lambda members: [member.value for member in members],
    )
    return Field(default=default, sa_type=column_type, **kwargs)


def _serial_id() -> Any:
    """A serial primary key, typed `int`: every row the code holds has been flushed or read
    (services flush before they use an id), so readers never check for None. Before the
    flush of a new row the attribute is None, as the database assigns it."""
    return Field(default=None, primary_key=True)


def _tz(**kwargs: Any) -> Any:
    return Field(sa_type=sa.DateTime(timezone=True), **kwargs)


class User(SQLModel, table=True):
    __tablename__ = "users"

    id: int = _serial_id()
    email: str = Field(max_length=320, unique=True)
    name: str = Field(max_length=200)
    role: str = Field(default="user", max_length=16)
    created_at: datetime = _tz(default_factory=utcnow)


class ArticleTag(SQLModel, table=True):
    __tablename__ = "article_tags"

    article_id: int = Field(foreign_key="articles.id", primary_key=True, ondelete="CASCADE")
    tag_id: int = Field(foreign_key="tags.id", primary_key=True, ondelete="CASCADE")


class Tag(SQLModel, table=True):
    __tablename__ = "tags"

    id: int = _serial_id()
    name: str = Field(max_length=100, unique=True)
    articles: list["Article"] = Relationship(back_populates="tags", link_model=ArticleTag)


class Article(SQLModel, table=True):
    __tablename__ = "articles"

    id: int = _serial_id()
    title: str = Field(max_length=300)
    slug: str = Field(max_length=300, unique=True)
    body: str = ""
    status: ArticleStatus = _status(ArticleStatus, ArticleStatus.DRAFT, index=True)
    author_id: int = Field(foreign_key="users.id", index=True)
    created_at: datetime = _tz(default_factory=utcnow)
    updated_at: datetime = _tz(default_factory=utcnow)
    published_at: datetime | None = _tz(default=None)

    author: "User" = Relationship()
    tags: list["Tag"] = Relationship(back_populates="articles", link_model=ArticleTag)
    # The database deletes an article's comments (ON DELETE CASCADE); the ORM leaves it to it.
    comments: list["Comment"] = Relationship(
        back_populates="article",
        sa_relationship_kwargs={
            "order_by": "Comment.id",
            "cascade": "all, delete-orphan",
            "passive_deletes": True,
        },
    )


class Comment(SQLModel, table=True):
    __tablename__ = "comments"

    id: int = _serial_id()
    article_id: int = Field(foreign_key="articles.id", index=True, ondelete="CASCADE")
    author_name: str = Field(max_length=200)
    user_id: int | None = Field(default=None, foreign_key="users.id")
    body: str
    created_at: datetime = _tz(default_factory=utcnow)

    article: "Article" = Relationship(back_populates="comments")


class Category(SQLModel, table=True):
    __tablename__ = "categories"

    id: int = _serial_id()
    name: str = Field(max_length=200)
    slug: str = Field(max_length=200, unique=True)


class ProductCategory(SQLModel, table=True):
    __tablename__ = "product_categories"

    product_id: int = Field(foreign_key="products.id", primary_key=True, ondelete="CASCADE")
    category_id: int = Field(foreign_key="categories.id", primary_key=True, ondelete="CASCADE")


class Product(SQLModel, table=True):
    """A product is a content resource too: a child of the catalog parent, shown in menu
    order when published and not deleted (MODX's resource tree)."""

    __tablename__ = "products"

    id: int = _serial_id()
    name: str = Field(max_length=300)
    slug: str = Field(max_length=300, unique=True)
    description: str = ""
    base_price: Decimal = Field(sa_type=MONEY)
    sale_price: Decimal | None = Field(default=None, sa_type=MONEY)
    currency: str = Field(default="USD", max_length=3)
    stock: int = 0
    image: str = ""
    tags: list[str] = Field(
        default_factory=list,
        sa_column=sa.Column(postgresql.ARRAY(sa.String(100)), nullable=False, server_default="{}"),
    )
    parent_id: int = Field(default=1, index=True)
    menu_index: int = 0
    published: bool = False
    deleted: bool = False
    created_at: datetime = _tz(default_factory=utcnow)
    updated_at: datetime = _tz(default_factory=utcnow)

    variants: list["ProductVariant"] = Relationship(
        back_populates="product", sa_relationship_kwargs={"order_by": "ProductVariant.id"}
    )


class ProductVariant(SQLModel, table=True):
    __tablename__ = "product_variants"

    id: int = _serial_id()
    product_id: int = Field(foreign_key="products.id", index=True, ondelete="CASCADE")
    sku: str = Field(max_length=100, unique=True)
    name: str = Field(max_length=200)
    price: Decimal | None = Field(default=None, sa_type=MONEY)
    stock: int = 0

    product: "Product" = Relationship(back_populates="variants")


class _Publication(SQLModel):
    """The columns of pages and posts: two tables of the same shape (each its own slugs)."""

    id: int = _serial_id()
    title: str = Field(max_length=300)
    slug: str = Field(max_length=300, unique=True)
    description: str = ""
    body: str = ""
    published: bool = True
    created_at: datetime = _tz(default_factory=utcnow)


class Page(_Publication, table=True):
    __tablename__ = "pages"


class Post(_Publication, table=True):
    __tablename__ = "posts"


class Order(SQLModel, table=True):
    __tablename__ = "orders"

    id: uuid.UUID = Field(default_factory=uuid.uuid4, primary_key=True)
    status: OrderStatus = _status(OrderStatus, OrderStatus.PENDING, index=True)
    total: Decimal = Field(sa_type=MONEY)
    currency: str = Field(max_length=3)
    customer_email: str | None = Field(default=None, max_length=320)
    shipping_address: dict[str, Any] | None = Field(
        default=None, sa_column=sa.Column(postgresql.JSONB(), nullable=True)
    )
    user_id: int | None = Field(default=None, foreign_key="users.id")
    payment_session_id: str | None = Field(default=None, max_length=255, index=True)
    payment_url: str | None = None
    payment_id: str | None = Field(default=None, max_length=255)
    created_at: datetime = _tz(default_factory=utcnow)
    paid_at: datetime | None = _tz(default=None)
    # Set while the order holds its products' stock (from checkout until paid, or until it
    # expires unpaid at `expires_at`); null for orders placed before reservations.
    stock_reserved_at: datetime | None = _tz(default=None)
    expires_at: datetime | None = _tz(default=None)

    items: list["OrderItem"] = Relationship(
        back_populates="order", sa_relationship_kwargs={"order_by": "OrderItem.id"}
    )


class OrderItem(SQLModel, table=True):
    __tablename__ = "order_items"

    id: int = _serial_id()
    order_id: uuid.UUID = Field(foreign_key="orders.id", index=True, ondelete="CASCADE")
    product_id: int = Field(foreign_key="products.id")
    name: str = Field(max_length=300)
    price: Decimal = Field(sa_type=MONEY)
    quantity: int

    order: "Order" = Relationship(back_populates="items")


class CheckoutIdempotencyKey(SQLModel, table=True):
    """A checkout's `Idempotency-Key`, claimed in the order's transaction, with the answer it
    returns again (orders/idempotency.py)."""

    __tablename__ = "checkout_idempotency_keys"

    scope: str = Field(primary_key=True, max_length=300)
    key: str = Field(primary_key=True, max_length=255)
    fingerprint: str = Field(max_length=64)
    order_id: uuid.UUID | None = Field(default=None, foreign_key="orders.id", ondelete="CASCADE")
    payment_url: str | None = None
    created_at: datetime = _tz(default_factory=utcnow, index=True)


class PersistedQuery(SQLModel, table=True):
    """A GraphQL document by its SHA-256 (graphql_api/persisted.py)."""

    __tablename__ = "persisted_queries"

    sha256: str = Field(primary_key=True, max_length=64)
    document: str = Field(sa_type=sa.Text)
    registered: bool = False  # from a manifest: runs in allow-list mode
    created_at: datetime = _tz(default_factory=utcnow)
    last_used_at: datetime = _tz(default_factory=utcnow)  # pruned when long ago (worker)


class PaymentNotification(SQLModel, table=True):
    """Provider events already processed: a repeated notification changes nothing."""

    __tablename__ = "payment_notifications"

    provider: str = Field(primary_key=True, max_length=32)
    event_id: str = Field(primary_key=True, max_length=255)
    event_type: str = Field(max_length=100)
    received_at: datetime = _tz(default_factory=utcnow)


class Inquiry(SQLModel, table=True):
    __tablename__ = "inquiries"

    id: int = _serial_id()
    name: str = Field(max_length=200)
    email: str = Field(max_length=320)
    message: str
    status: InquiryStatus = _status(InquiryStatus, InquiryStatus.NEW)
    created_at: datetime = _tz(default_factory=utcnow)


class AuditLog(SQLModel, table=True):
    __tablename__ = "audit_logs"

    id: int = _serial_id()
    action: str = Field(max_length=200)
    user_id: str = Field(max_length=200)
    timestamp: str = Field(max_length=40, description="ISO 8601, as the spec records it")
    data: dict[str, Any] = Field(
        default_factory=dict, sa_column=sa.Column(postgresql.JSONB(), nullable=False)
    )


__all__ = [
    "ApiKey",
    "Article",
    "ArticleTag",
    "AuditLog",
    "Category",
    "Comment",
    "Inquiry",
    "Order",
    "OrderItem",
    "OutboxEvent",
    "Page",
    "PaymentNotification",
    "Post",
    "ProcessedEvent",
    "Product",
    "ProductCategory",
    "ProductVariant",
    "Tag",
    "User",
    "metadata",
]
