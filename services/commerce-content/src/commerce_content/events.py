"""The event types commerce-content emits, registered with webhook-hub at startup."""

from typing import TYPE_CHECKING

from pydantic import BaseModel
from servicekit.events import EventTypeRegistry, Visibility

from commerce_content.models import ArticleStatus, InquiryStatus, OrderStatus

if TYPE_CHECKING:
    from commerce_content.models import Order

registry = EventTypeRegistry("commerce-content")

ARTICLE_CREATED = "article.created"
ARTICLE_UPDATED = "article.updated"
ARTICLE_DELETED = "article.deleted"


class ArticleChanged(BaseModel):
    id: int
    slug: str
    title: str
    status: ArticleStatus
    author_id: int


_ARTICLE_EXAMPLE = {
    "id": 12,
    "slug": "spring-collection",
    "title": "The spring collection",
    "status": "published",
    "author_id": 3,
}
for _name, _what in (
    (ARTICLE_CREATED, "An article was created."),
    (ARTICLE_UPDATED, "An article was changed (PUT or PATCH)."),
    (ARTICLE_DELETED, "An article was deleted."),
):
    registry.declare(_name, ArticleChanged, description=_what, example=_ARTICLE_EXAMPLE)


INQUIRY_CREATED = "inquiry.created"


class InquiryCreated(BaseModel):
    id: int
    name: str
    email: str
    message: str
    status: InquiryStatus


registry.declare(
    INQUIRY_CREATED,
    InquiryCreated,
    description="A visitor sent the contact form.",
    # A visitor's name, e-mail and message: delivered only to operator-approved owners.
    visibility=Visibility.PERSONAL,
    example={
        "id": 7,
        "name": "Ada Lovelace",
        "email": "ada@example.com",
        "message": "Do you ship to Norway?",
        "status": "new",
    },
)


ORDER_CREATED = "order.created"
ORDER_PAID = "order.paid"
ORDER_EXPIRED = "order.expired"


class OrderSummary(BaseModel):
    """The spec's sample order payload (`id`, `status`, `total`, `created_at`) and a little more."""

    id: str
    status: OrderStatus
    total: str
    currency: str
    created_at: str
    customer_email: str | None = None
    payment_id: str | None = None

    @classmethod
    def of(cls, order: "Order") -> "OrderSummary":
        return cls(
            id=str(order.id),
            status=order.status,
            total=str(order.total),
            currency=order.currency,
            created_at=order.created_at.isoformat(),
            customer_email=order.customer_email,
            payment_id=order.payment_id,
        )


_ORDER_EXAMPLE = {
    "id": "5b1f4c9e-2d8a-4b61-9f0e-3c7d2a1b8e45",
    "status": "pending",
    "total": "59.97",
    "currency": "USD",
    "created_at": "2026-11-22T10:00:00+00:00",
    "customer_email": "ada@example.com",
    "payment_id": None,
}
registry.declare(
    ORDER_CREATED, OrderSummary, description="A customer checked out.", example=_ORDER_EXAMPLE
)
registry.declare(
    ORDER_PAID,
    OrderSummary,
    description="The payment provider confirmed an order's payment.",
    example={**_ORDER_EXAMPLE, "status": "paid", "payment_id": "pi_3Nq"},
)
registry.declare(
    ORDER_EXPIRED,
    OrderSummary,
    description=(
        "An order was not paid in time (the checkout session expired, or the worker gave"
        " its reserved stock back): it will not be paid."
    ),
    example={**_ORDER_EXAMPLE, "status": "expired"},
)


CONTENT_CREATED = "content.created"
CONTENT_UPDATED = "content.updated"


class ContentSaved(BaseModel):
    """The content-saved notification's body, also published as an event."""

    event: str
    id: int
    alias: str
    published: bool


registry.declare(
    CONTENT_CREATED,
    ContentSaved,
    description="A content item was created through the content admin API.",
    example={"event": "created", "id": 21, "alias": "ceramic-mug", "published": True},
)
registry.declare(
    CONTENT_UPDATED,
    ContentSaved,
    description="A content item was changed through the content admin API.",
    example={"event": "updated", "id": 21, "alias": "ceramic-mug", "published": False},
)
