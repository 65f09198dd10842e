"""scraper-manager's errors: the servicekit kinds it raises and the OpenAPI responses they
generate. The spec leaves the body of errors open; we use servicekit's flat envelope, as
webhook-hub does, so a client of both parses one form: `{"error": <text>, "code": <code>}`."""

from typing import Any

from servicekit.errors import (
    BadRequest,
    Conflict,
    Forbidden,
    InvalidCursor,
    NotFound,
    PayloadTooLarge,
    ServiceError,
    Unauthorized,
    UnprocessableEntity,
)
from servicekit.web.errors import FlatErrorBody, error_responses, flat_error_body


def declared(*errors: type[ServiceError]) -> dict[int | str, dict[str, Any]]:
    """The `responses=` of an operation that can raise `errors`, in this service's envelope."""
    return error_responses(FlatErrorBody, *errors, example_of=flat_error_body)


AUTH_ERRORS = declared(Unauthorized, Forbidden)
NOT_FOUND = declared(NotFound)
BAD_CURSOR = declared(InvalidCursor)
BAD_REQUEST = declared(BadRequest)
CONFLICT = declared(Conflict)
INVALID = declared(PayloadTooLarge, UnprocessableEntity)
