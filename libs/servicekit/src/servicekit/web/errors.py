"""Typed errors that carry their HTTP status, and the one handler per service that renders them."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import structlog
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import BaseRoute, Match
from starlette.types import Scope

logger = structlog.get_logger(__name__)


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


_STATUS_ERRORS: dict[int, type[ServiceError]] = {
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

ErrorRenderer = Callable[[ServiceError, Request], dict[str, Any]]


def describe_validation_errors(errors: Sequence[Any]) -> str:
    """One readable line from pydantic's error list, e.g. `body.events: Field required`."""
    parts = []
    for error in errors:
        location = ".".join(str(part) for part in error.get("loc", ()))
        parts.append(f"{location}: {error.get('msg', 'invalid')}" if location else error["msg"])
    return "; ".join(parts) or "Invalid request"


def install_error_handlers(
    app: FastAPI, render: ErrorRenderer, *, validation_status: int = 422
) -> None:
    """Map every error the app can raise to the service's envelope, once."""

    def respond(error: ServiceError, request: Request, status: int | None = None) -> JSONResponse:
        return JSONResponse(
            render(error, request), status_code=status or error.status_code, headers=error.headers
        )

    async def on_service_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ServiceError)
        return respond(exc, request)

    async def on_validation_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        # `validation_error` whatever the status the service answers it with (422 or 400).
        error = UnprocessableEntity(
            describe_validation_errors(exc.errors()),
            extra={"details": _json_safe_errors(exc.errors())},
        )
        return respond(error, request, validation_status)

    async def on_http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        error_cls = _STATUS_ERRORS.get(exc.status_code, ServiceError)
        message = exc.detail if isinstance(exc.detail, str) else None
        headers = dict(exc.headers or {})
        if exc.status_code == 405:
            # Starlette names the methods of the one route it tried; a path has several.
            allowed = allowed_methods(request.app.router.routes, request.scope)
            if request.method == "OPTIONS":
                allow = ", ".join([*allowed, "OPTIONS"])
                return Response(status_code=204, headers={"Allow": allow})
            headers["Allow"] = ", ".join(allowed)
        error = error_cls(message, headers=headers)
        return respond(error, request, exc.status_code)

    async def on_unexpected(request: Request, exc: Exception) -> JSONResponse:
        logger.exception("unhandled error", path=request.url.path)
        return respond(ServiceError(), request)

    app.add_exception_handler(ServiceError, on_service_error)
    app.add_exception_handler(RequestValidationError, on_validation_error)
    app.add_exception_handler(StarletteHTTPException, on_http_error)
    app.add_exception_handler(Exception, on_unexpected)


_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")


def allowed_methods(routes: Sequence[BaseRoute], scope: Scope) -> list[str]:
    """Every method some route serves fully at the scope's path, in a stable order (asked of
    each method in turn: included routers only answer whether they match)."""
    return [
        method
        for method in _METHODS
        if any(route.matches({**scope, "method": method})[0] is Match.FULL for route in routes)
    ]


def _json_safe_errors(errors: Sequence[Any]) -> list[dict[str, Any]]:
    return [
        {"loc": [str(p) for p in e.get("loc", ())], "msg": e.get("msg"), "type": e.get("type")}
        for e in errors
    ]


def error_responses(
    model: type[BaseModel], *errors: type[ServiceError]
) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses=` entries declaring which errors an operation can answer."""
    declared: dict[int | str, dict[str, Any]] = {}
    for error in errors:
        declared[error.status_code] = {"model": model, "description": error.default_message}
    return declared
