"""`/graphql` over HTTP: POST for any operation, GET for queries (so caches can keep them),
GraphiQL for browsers outside production.

Responses follow GraphQL over HTTP with `application/json`: an executed operation answers 200
with `data`/`errors`/`extensions`; a request that cannot be executed answers 400 (not a
GraphQL request), 401 (credentials that are wrong, rather than absent) or 405 (a mutation
over GET), with the same `errors` shape.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, BackgroundTasks, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, Field
from pydantic_core import to_json
from servicekit.web.input_guard import (
    DEFAULT_MAX_JSON_DEPTH,
    InvalidNumber,
    json_depth_exceeds,
    load_finite_json,
)
from servicekit.web.pages.docs import graphiql_response
from servicekit.web_session import SessionDep
from sqlmodel.ext.asyncio.session import AsyncSession
from strawberry.exceptions import MissingQueryError
from strawberry.schema.exceptions import CannotGetOperationTypeError, InvalidOperationTypeError
from strawberry.types.graphql import OperationType

from commerce_content.errors import NotAuthenticated
from commerce_content.graphql_api.context import GraphQLContext
from commerce_content.graphql_api.directives import Errors
from commerce_content.graphql_api.errors import BAD_USER_INPUT
from commerce_content.graphql_api.ide import SAMPLE_QUERY
from commerce_content.graphql_api.persisted import (
    PersistedQueryRefused,
    PersistedQueryStore,
    Resolved,
    decide,
    persisted_hash,
    sha256_hex,
)
from commerce_content.graphql_api.schema import CommerceSchema
from commerce_content.identity.dependencies import Caller, identify
from commerce_content.settings import Settings

router = APIRouter(tags=["graphql"])
PATH = "/graphql"
# The answer depends on who asks: a shared cache must key on the credentials.
VARY = {"Vary": "Authorization"}


class GraphQLError(BaseModel):
    message: str
    path: list[str | int] | None = None
    extensions: dict[str, Any] | None = None


class GraphQLResponse(BaseModel):
    data: dict[str, Any] | None = None
    errors: list[GraphQLError] | None = None
    extensions: dict[str, Any] | None = Field(
        default=None, description="`cost`: the operation's requested and maximum cost."
    )


class RequestRefused(Exception):
    def __init__(self, status: int, message: str, code: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.code = code
        self.headers = headers or {}

    def response(self) -> JSONResponse:
        body = {"errors": [{"message": str(self), "extensions": {"code": self.code}}]}
        return JSONResponse(body, status_code=self.status, headers={**VARY, **self.headers})


QUERY_EXAMPLE = {
    "query": "query($first: Int) { products(page: {first: $first}) { totalCount"
    " edges { node { id name pricing { basePrice currency } } } } }",
    "variables": {"first": 1},
}
DATA_EXAMPLE = {
    "data": {
        "products": {
            "totalCount": 1,
            "edges": [
                {
                    "node": {
                        "id": "UHJvZHVjdDoyMQ==",
                        "name": "Ceramic mug",
                        "pricing": {"basePrice": "19.99", "currency": "USD"},
                    }
                }
            ],
        }
    }
}


def _refusal(description: str, message: str, code: str) -> dict[str, Any]:
    example = {"errors": [{"message": message, "extensions": {"code": code}}]}
    return {
        "model": GraphQLResponse,
        "description": description,
        "content": {"application/json": {"example": example}},
    }


RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "model": GraphQLResponse,
        "description": "The operation ran: data and/or errors",
        "content": {"application/json": {"example": DATA_EXAMPLE}},
    },
    400: _refusal("Not a GraphQL request", "Expected a JSON body with `query`", "BAD_USER_INPUT"),
    401: _refusal(
        "Wrong or expired credentials", "Use 'Authorization: Bearer <token>'", "UNAUTHENTICATED"
    ),
    405: _refusal("A mutation sent with GET", "Mutations must be sent with POST", "BAD_USER_INPUT"),
}


async def _caller(request: Request, session: AsyncSession) -> Caller | None:
    """Anonymous callers are GUESTs; credentials that are sent must be right."""
    header = request.headers.get("authorization")
    if not header:
        return None
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise RequestRefused(401, "Use 'Authorization: Bearer <token>'", Errors.UNAUTHENTICATED)
    try:
        return await identify(token.strip(), request.app.state.settings, session)
    except NotAuthenticated as exc:
        raise RequestRefused(
            401, exc.message, Errors.UNAUTHENTICATED, {"WWW-Authenticate": "Bearer"}
        ) from exc


def _variables(raw: Any) -> dict[str, Any] | None:
    if raw is None or raw == "":
        return None
    if isinstance(raw, str):
        # From the query string, where the input guard sees no JSON: its depth is checked
        # here before parsing, which recurses.
        if json_depth_exceeds(raw.encode(), DEFAULT_MAX_JSON_DEPTH):
            raise RequestRefused(
                400,
                f"variables are nested deeper than {DEFAULT_MAX_JSON_DEPTH} levels",
                BAD_USER_INPUT,
            )
        try:
            raw = load_finite_json(raw, "variables")
        except InvalidNumber as exc:
            raise RequestRefused(400, exc.message, BAD_USER_INPUT) from exc
        except ValueError as exc:
            raise RequestRefused(400, "variables must be a JSON object", BAD_USER_INPUT) from exc
    if not isinstance(raw, dict):
        raise RequestRefused(400, "variables must be a JSON object", BAD_USER_INPUT)
    return raw


async def _execute(
    request: Request,
    session: AsyncSession,
    background: BackgroundTasks,
    params: dict[str, Any],
    allowed: set[OperationType],
) -> Response:
    settings: Settings = request.app.state.settings
    persisted = await _persisted(request, session, params, settings.graphql_allow_list)
    query = persisted.query
    if not isinstance(query, str) or not query.strip():
        raise RequestRefused(400, "A GraphQL request needs a `query` string", BAD_USER_INPUT)
    operation_name = params.get("operationName")
    if operation_name is not None and not isinstance(operation_name, str):
        raise RequestRefused(400, "operationName must be a string", BAD_USER_INPUT)
    variables = _variables(params.get("variables"))
    context = GraphQLContext(
        request=request,
        settings=settings,
        session=session,
        background_tasks=background,
        caller=await _caller(request, session),
        field_limiter=request.app.state.graphql_field_limiter,
    )
    schema: CommerceSchema = request.app.state.graphql_schema
    try:
        result = await schema.execute(
            query,
            variable_values=variables,
            context_value=context,
            operation_name=operation_name,
            allowed_operation_types=allowed,
        )
    except InvalidOperationTypeError as exc:
        raise RequestRefused(
            405, "Mutations must be sent with POST", BAD_USER_INPUT, {"Allow": "POST"}
        ) from exc
    except MissingQueryError as exc:
        raise RequestRefused(400, "A GraphQL request needs a `query`", BAD_USER_INPUT) from exc
    except CannotGetOperationTypeError as exc:
        # Only fragments, or no operation of the given name: nothing to run.
        named = f" named {operation_name!r}" if operation_name else ""
        raise RequestRefused(
            400, f"The document has no operation{named} to run", BAD_USER_INPUT
        ) from exc
    if persisted.register is not None and result.data is not None:
        # Stored once it ran: a document that does not validate is never kept.
        await _store(request).store(session, persisted.register, query)
    body: dict[str, Any] = {"data": result.data}
    if result.errors:
        body["errors"] = [error.formatted for error in result.errors]
    if result.extensions:
        body["extensions"] = result.extensions
    headers = dict(VARY)
    if context.cache_control is not None:
        headers["Cache-Control"] = context.cache_control
    # pydantic-core's encoder: a page of products is a large document.
    return Response(to_json(body), media_type="application/json", headers=headers)


def _store(request: Request) -> PersistedQueryStore:
    store: PersistedQueryStore = request.app.state.persisted_queries
    return store


async def _persisted(
    request: Request, session: AsyncSession, params: dict[str, Any], allow_list: bool
) -> Resolved:
    """The document to run, from `query` or from `extensions.persistedQuery`."""
    query = params.get("query")
    try:
        digest = persisted_hash(params.get("extensions"))
        lookup = digest
        if digest is None and allow_list and isinstance(query, str) and query.strip():
            lookup = sha256_hex(query)
        found = (
            None
            if lookup is None
            else await _store(request).find(session, lookup, registered=allow_list)
        )
        return decide(digest, query, found, allow_list=allow_list)
    except PersistedQueryRefused as refused:
        raise RequestRefused(
            refused.status, str(refused), refused.code, refused.headers
        ) from refused


@router.post(
    PATH,
    response_model=GraphQLResponse,
    responses=RESPONSES,
    summary="Run a GraphQL operation",
    description=(
        "A query or mutation as JSON `{query, variables?, operationName?}`. Anonymous callers"
        " are guests; `Authorization: Bearer <JWT>` (or `X-API-Key`) for more. Business"
        " problems of mutations are in their payload's `userErrors`. The schema is at"
        " `/graphql` (GraphiQL outside production) and in the service's schema.graphql."
    ),
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {
                    "schema": {
                        "type": "object",
                        "required": ["query"],
                        "properties": {
                            "query": {"type": "string"},
                            "variables": {"type": "object"},
                            "operationName": {"type": "string"},
                            "extensions": {
                                "type": "object",
                                "description": "`persistedQuery: {version: 1, sha256Hash}`"
                                " (Apollo's automatic persisted queries): the hash alone runs"
                                " a stored document, or answers `PersistedQueryNotFound`.",
                            },
                        },
                    },
                    "example": QUERY_EXAMPLE,
                }
            },
        }
    },
)
async def graphql_post(
    request: Request, session: SessionDep, background: BackgroundTasks
) -> Response:
    """A GraphQL request as JSON: `{query, variables?, operationName?}`."""
    try:
        try:
            params = await request.json()
        except ValueError as exc:
            raise RequestRefused(400, "The body must be JSON", BAD_USER_INPUT) from exc
        if not isinstance(params, dict):
            raise RequestRefused(400, "The body must be a JSON object", BAD_USER_INPUT)
        return await _execute(
            request, session, background, params, {OperationType.QUERY, OperationType.MUTATION}
        )
    except RequestRefused as refused:
        return refused.response()


# The GET parameters, declared for the OpenAPI document and read from the address by hand:
# FastAPI's per-parameter validation was a measurable part of a persisted query's request,
# and each is a plain string anyway (`_execute` parses and refuses them).
GET_PARAMETERS = [
    {
        "name": name,
        "in": "query",
        "required": False,
        "schema": {"type": "string"},
        "description": description,
    }
    for name, description in (
        ("query", "The document (omitted for a persisted query)."),
        ("variables", "The variables as a JSON object."),
        ("operationName", "The operation to run, when the document has several."),
        ("extensions", "JSON: `{persistedQuery: {version: 1, sha256Hash}}`."),
    )
]


@router.get(
    PATH,
    response_model=GraphQLResponse,
    responses=RESPONSES,
    summary="Run a GraphQL query from the address",
    description=(
        "A query (never a mutation) in the address: `query`, `variables` as JSON,"
        " `operationName`, `extensions` (JSON; a persisted query's hash instead of `query`);"
        " HTTP caches may keep the answer (`Cache-Control` from"
        " `@cacheControl`). Browsers asking for HTML without `query` get GraphiQL outside"
        " production."
    ),
    openapi_extra={"parameters": GET_PARAMETERS},
)
async def graphql_get(
    request: Request, session: SessionDep, background: BackgroundTasks
) -> Response:
    """A query in the address (`query`, `variables` as JSON, `operationName`), which HTTP
    caches can keep; without `query`, browsers get GraphiQL outside production."""
    settings: Settings = request.app.state.settings
    address = request.query_params  # parsed once
    query, extensions = address.get("query"), address.get("extensions")
    if (
        query is None
        and extensions is None
        and settings.graphql_ide
        and not settings.is_production
        and "text/html" in request.headers.get("accept", "")
    ):
        # From the vendored assets (strawberry's page loads them from a CDN): works offline.
        return graphiql_response(request, PATH, subscriptions=True, default_query=SAMPLE_QUERY)
    try:
        return await _execute(
            request,
            session,
            background,
            {
                "query": query,
                "variables": address.get("variables"),
                "operationName": address.get("operationName"),
                "extensions": extensions,
            },
            {OperationType.QUERY},
        )
    except RequestRefused as refused:
        return refused.response()
