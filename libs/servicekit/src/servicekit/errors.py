"""Typed errors that carry their HTTP status: raised by service layers, repositories and the
kit's own non-web modules alike, and rendered once per service by `servicekit.web.errors`.
Framework-free on purpose, so code below the endpoints never imports the web stack; what the
OpenAPI description says of them (`error_responses`) is here too, as it reads their class
attributes alone and `servicekit.auth`'s routes, below the web package, declare theirs."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from pydantic import BaseModel


class ServiceError(Exception):
    """An error a client caused or must know about; `status_code` and `code` are its contract."""

    status_code: ClassVar[int] = 500
    code: ClassVar[str] = "internal_error"
    default_message: ClassVar[str] = "Internal server error"

    def __init__(
        self,
        message: str | None = None,
        *,
        headers: Mapping[str, str] | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        self.message = message or self.default_message
        self.headers = dict(headers or {})
        # Members the envelope adds beside the message (e.g. `invalid_events`).
        self.extra = dict(extra or {})
        super().__init__(self.message)


class BadRequest(ServiceError):
    status_code = 400
    code = "bad_request"
    default_message = "Bad request"


class Unauthorized(ServiceError):
    status_code = 401
    code = "unauthorized"
    default_message = "Unauthorized"

    def __init__(self, message: str | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("headers", {"WWW-Authenticate": "Bearer"})
        super().__init__(message, **kwargs)


class InvalidCursor(BadRequest):
    code = "invalid_cursor"
    default_message = "cursor is not one this API returned"


class Forbidden(ServiceError):
    status_code = 403
    code = "forbidden"
    default_message = "Forbidden"


class NotFound(ServiceError):
    status_code = 404
    code = "not_found"
    default_message = "Not found"


class MethodNotAllowed(ServiceError):
    status_code = 405
    code = "method_not_allowed"
    default_message = "Method not allowed"


class NotAcceptable(ServiceError):
    status_code = 406
    code = "not_acceptable"
    default_message = "Not acceptable"


class Conflict(ServiceError):
    status_code = 409
    code = "conflict"
    default_message = "Conflict"


class PayloadTooLarge(ServiceError):
    status_code = 413
    code = "payload_too_large"
    default_message = "Request body too large"


class UnsupportedMediaType(ServiceError):
    status_code = 415
    code = "unsupported_media_type"
    default_message = "Unsupported media type"


class UnprocessableEntity(ServiceError):
    status_code = 422
    code = "validation_error"
    default_message = "Validation failed"


class RateLimited(ServiceError):
    status_code = 429
    code = "rate_limited"
    default_message = "Rate limit exceeded"


class ServiceUnavailable(ServiceError):
    status_code = 503
    code = "unavailable"
    default_message = "Service unavailable"


STATUS_ERRORS: dict[int, type[ServiceError]] = {
    cls.status_code: cls
    for cls in (
        BadRequest,
        Unauthorized,
        Forbidden,
        NotFound,
        MethodNotAllowed,
        NotAcceptable,
        Conflict,
        PayloadTooLarge,
        UnsupportedMediaType,
        UnprocessableEntity,
        RateLimited,
        ServiceUnavailable,
    )
}


def error_responses(
    model: type[BaseModel],
    *errors: type[ServiceError],
    example_of: Callable[[ServiceError], dict[str, Any]] | None = None,
) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses=` entries for the errors an operation can raise: one per status, its
    description naming each error's code and meaning; with `example_of` (the service's body
    for an error), one named example per error."""
    by_status: dict[int, list[type[ServiceError]]] = {}
    for error in errors:
        by_status.setdefault(error.status_code, []).append(error)
    declared: dict[int | str, dict[str, Any]] = {}
    for status, group in sorted(by_status.items()):
        described = [f"`{e.code}`: {e.default_message}" for e in dict.fromkeys(group)]
        declared[status] = {"model": model, "description": "; ".join(described)}
        if example_of is not None:
            examples = {
                e.code: {"summary": e.default_message, "value": example_of(e())}
                for e in dict.fromkeys(group)
            }
            declared[status]["content"] = {"application/json": {"examples": examples}}
    return declared
