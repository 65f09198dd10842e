"""The one place a service's typed errors (`servicekit.errors`) become HTTP: the handlers that
render them in the service's envelope, and the OpenAPI responses they generate."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import structlog
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import BaseRoute, Match
from starlette.types import Scope

from servicekit.errors import STATUS_ERRORS, ServiceError, UnprocessableEntity, error_responses

logger = structlog.get_logger(__name__)


ErrorRenderer = Callable[[ServiceError, Request], dict[str, Any]]


def describe_validation_errors(errors: Sequence[Any]) -> str:
    """One readable line from pydantic's error list, e.g. `body.events: Field required`."""
    parts = []
    for error in errors:
        location = ".".join(str(part) for part in error.get("loc", ()))
        parts.append(f"{location}: {error.get('msg', 'invalid')}" if location else error["msg"])
    return "; ".join(parts) or "Invalid request"


def validation_refusal(errors: Sequence[Any]) -> UnprocessableEntity:
    """The error a request whose body breaks its model is answered with, from pydantic's error
    list (locations as FastAPI gives them, `body` first): for a part of a body validated on its
    own (an event of a batch), so it is refused exactly as the same body sent alone."""
    return UnprocessableEntity(
        describe_validation_errors(errors), extra={"details": _json_safe_errors(errors)}
    )


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
        return respond(validation_refusal(exc.errors()), request, validation_status)

    async def on_http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        error_cls = STATUS_ERRORS.get(exc.status_code, ServiceError)
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


class FlatErrorBody(BaseModel):
    """`{"error": <text>, "code": <code>, ...}`: the envelope of the services whose spec fixes
    `error` as a string; members an error adds (e.g. `invalid_events`) sit beside them."""

    model_config = ConfigDict(extra="allow")

    error: str
    code: str


def flat_error_body(error: ServiceError) -> dict[str, Any]:
    return {"error": error.message, "code": error.code, **error.extra}


def render_flat_error(error: ServiceError, request: Request) -> dict[str, Any]:
    return flat_error_body(error)


def flat_error_responses(*errors: type[ServiceError]) -> dict[int | str, dict[str, Any]]:
    """`error_responses` in the flat envelope, with an example of each error."""
    return error_responses(FlatErrorBody, *errors, example_of=flat_error_body)
