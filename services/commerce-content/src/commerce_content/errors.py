"""commerce-content's one error system: `CommerceError` and its classes, each a
`servicekit.errors` kind (so it carries its HTTP status), raised by services and endpoints
alike; REST renders them in the envelope of the route group, GraphQL maps the same classes
to `userErrors` codes, and `error_responses` turns them into each operation's OpenAPI
responses.

Envelopes (the first two fixed by the spec, the third GraphQL's):

- the resource API under `/api/v1/`: `{"error": {"code": ..., "message": ...}}`;
- `/graphql`: GraphQL's `{"errors": [{"message": ..., "extensions": {"code": ...}}]}`;
- everything else (checkout, payment notifications, search, contact, admin action, content
  API): `{"error": <text>}`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from fastapi import Request
from pydantic import BaseModel
from servicekit.errors import (
    BadRequest,
    Conflict,
    Forbidden,
    NotAcceptable,
    NotFound,
    RateLimited,
    ServiceError,
    ServiceUnavailable,
    Unauthorized,
    UnprocessableEntity,
    error_responses,
)

RESOURCE_API_PREFIX = "/api/v1/"
GRAPHQL_PATH = "/graphql"


class CommerceError(ServiceError):
    """The base of every error commerce-content raises. `field` is the path of the input at
    fault (GraphQL's `userErrors[].field` reports it; REST answers the status)."""

    def __init__(
        self, message: str | None = None, *, field: Sequence[str] = (), **kwargs: Any
    ) -> None:
        super().__init__(message, **kwargs)
        self.field = tuple(field)


# The kinds every route group uses, as commerce-content's own classes.
class InvalidRequest(CommerceError, BadRequest):
    """A request the service cannot read (400)."""


class NotAuthenticated(CommerceError, Unauthorized):
    """No credentials, or wrong ones (401)."""


class NotPermitted(CommerceError, Forbidden):
    """Credentials without the role the operation needs (403)."""


class NoSuchThing(CommerceError, NotFound):
    """A record that does not exist, or is not the caller's (404)."""


class AlreadyDone(CommerceError, Conflict):
    """A change that conflicts with the record as it is (409)."""


class UnknownVersion(CommerceError, NotAcceptable):
    default_message = "Unknown API version in Accept"


class TooManyRequests(CommerceError, RateLimited):
    """The caller's rate limit is spent (429)."""


class UpstreamUnavailable(CommerceError, ServiceUnavailable):
    """A dependency (NATS, the payment provider) is not answering (503)."""


class IdempotencyKeyReused(CommerceError, UnprocessableEntity):
    """An `Idempotency-Key` already used with another request within its window (422)."""

    code = "idempotency_key_reused"
    default_message = "The Idempotency-Key was used with another request"


class CheckoutError(CommerceError, BadRequest):
    """A cart the shop refuses. REST answers 400 `{error: "<ORDER_CODE>: <text>"}` (the code
    first, so clients tell them apart without a second envelope); GraphQL's `createOrder`
    puts the same error in `userErrors` with `order_code` as its OrderErrorCode."""

    code = "invalid_checkout"
    default_message = "The checkout is invalid"
    order_code: ClassVar[str | None] = None

    def __init__(self, message: str | None = None, *, field: Sequence[str] = ()) -> None:
        self.detail = message or self.default_message
        text = f"{self.order_code}: {self.detail}" if self.order_code else self.detail
        super().__init__(text, field=field)


class InsufficientStock(CheckoutError):
    code = "insufficient_stock"
    default_message = "Not enough of a product in stock"
    order_code = "INSUFFICIENT_STOCK"


class InvalidAddress(CheckoutError):
    code = "invalid_address"
    default_message = "shippingAddress is invalid"
    order_code = "INVALID_ADDRESS"


class PaymentDeclined(CheckoutError):
    code = "payment_declined"
    default_message = "The payment provider declined the payment session"
    order_code = "PAYMENT_DECLINED"


class ProductUnavailable(CheckoutError):
    code = "product_unavailable"
    default_message = "A product is unknown, unpublished or deleted"
    order_code = "PRODUCT_UNAVAILABLE"


class ProductError(CommerceError):
    """A product the content API and GraphQL's product mutations refuse to save;
    `product_code` is GraphQL's ProductErrorCode."""

    product_code: ClassVar[str] = "INVALID"


class ProductNotFound(ProductError, NotFound):
    code = "product_not_found"
    default_message = "Content item not found"
    product_code = "NOT_FOUND"


class DuplicateSlug(ProductError, Conflict):
    code = "duplicate_slug"
    default_message = "The alias is already used"
    product_code = "DUPLICATE_SLUG"


class InvalidProductField(ProductError, BadRequest):
    code = "invalid_product"
    default_message = "A product field is invalid"
    product_code = "INVALID"


class UnknownCategory(ProductError, BadRequest):
    code = "unknown_category"
    default_message = "Unknown categories"
    product_code = "UNKNOWN_CATEGORY"


class InvalidProduct(InvalidProductField):
    """Several field problems at once, so a form can show them all."""

    def __init__(self, problems: Sequence[ProductError] = ()) -> None:
        super().__init__("; ".join(p.message for p in problems) or None)
        self.problems = list(problems) or [InvalidProductField()]


class SlugTaken(CommerceError, Conflict):
    code = "slug_taken"
    default_message = "The slug is already used by another article"


class UnknownAuthor(CommerceError, UnprocessableEntity):
    code = "unknown_author"
    default_message = "The author does not exist"


class ErrorDetail(BaseModel):
    code: str
    message: str


class ResourceErrorBody(BaseModel):
    error: ErrorDetail


class PlainErrorBody(BaseModel):
    error: str


# Refusals of the request itself (the input guard, the body size limit) in GraphQL's words.
_GRAPHQL_CODES = {400: "BAD_USER_INPUT", 413: "BAD_USER_INPUT", 422: "BAD_USER_INPUT"}


def resource_body(error: ServiceError) -> dict[str, Any]:
    return {"error": {"code": error.code, "message": error.message, **error.extra}}


def plain_body(error: ServiceError) -> dict[str, Any]:
    return {"error": error.message}


def render_error(error: ServiceError, request: Request) -> dict[str, Any]:
    if request.url.path.startswith(RESOURCE_API_PREFIX):
        return resource_body(error)
    if request.url.path == GRAPHQL_PATH:
        # GraphQL clients read `errors`, as the endpoint's own refusals give them.
        code = _GRAPHQL_CODES.get(error.status_code, error.code.upper())
        return {"errors": [{"message": error.message, "extensions": {"code": code}}]}
    return plain_body(error)


def resource_errors(*errors: type[ServiceError]) -> dict[int | str, dict[str, Any]]:
    """OpenAPI responses of a resource-API operation: its errors in `{error: {code, message}}`."""
    return error_responses(ResourceErrorBody, *errors, example_of=resource_body)


def plain_errors(*errors: type[ServiceError]) -> dict[int | str, dict[str, Any]]:
    """OpenAPI responses of a utility operation: its errors in `{error: <text>}`."""
    return error_responses(PlainErrorBody, *errors, example_of=plain_body)


# What every route of a group can answer besides its own errors (its guards).
RESOURCE_GUARDS: tuple[type[ServiceError], ...] = (
    InvalidRequest,
    NotAuthenticated,
    NotPermitted,
    TooManyRequests,
    ServiceError,
)
VERSIONED_GUARDS: tuple[type[ServiceError], ...] = (*RESOURCE_GUARDS, UnknownVersion)
