"""The event types commerce-content emits, registered with webhook-hub at startup."""

from pydantic import BaseModel
from servicekit.events import EventTypeRegistry

registry = EventTypeRegistry("commerce-content")

ARTICLE_CREATED = "article.created"
ARTICLE_UPDATED = "article.updated"
ARTICLE_DELETED = "article.deleted"


class ArticleChanged(BaseModel):
    id: int
    slug: str
    title: str
    status: str
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
    status: str


registry.declare(
    INQUIRY_CREATED,
    InquiryCreated,
    description="A visitor sent the contact form.",
    example={
        "id": 7,
        "name": "Ada Lovelace",
        "email": "ada@example.com",
        "message": "Do you ship to Norway?",
        "status": "new",
    },
)
