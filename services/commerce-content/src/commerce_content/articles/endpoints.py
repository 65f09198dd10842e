"""`/api/v1/articles`: the resource API conventions of the spec, thin over ArticleService."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response, status
from fastapi.responses import JSONResponse
from servicekit.paging import DEFAULT_PAGE_SIZE
from servicekit.web.params import MAX_DB_INT, DbId, OptionalDbIdQuery

from commerce_content.articles.dependencies import ArticleServiceDep
from commerce_content.articles.representation import comment_out, relations_for, render
from commerce_content.articles.schemas import (
    INCLUDABLE,
    SORTABLE,
    ArticleCreate,
    ArticleReplace,
    ArticleUpdate,
    CommentCreate,
    ListEnvelope,
    SingleEnvelope,
)
from commerce_content.articles.service import ArticleQuery, OffsetPage
from commerce_content.articles.versioning import (
    media_type,
    negotiate_version,
    versioned_content,
)
from commerce_content.errors import (
    VERSIONED_GUARDS,
    InvalidRequest,
    NoSuchThing,
    SlugTaken,
    UnknownAuthor,
    resource_errors,
)
from commerce_content.identity.dependencies import AnyCaller, ManagerCaller, UserCaller
from commerce_content.models import ArticleStatus
from commerce_content.rate_limit.limiter import enforce_rate_limit

router = APIRouter(
    prefix="/articles",
    tags=["articles"],
    dependencies=[Depends(enforce_rate_limit)],
)
Version = Annotated[int, Depends(negotiate_version)]
MAX_PER_PAGE = 100
ARTICLE = {
    "id": 12,
    "title": "The spring collection",
    "slug": "the-spring-collection",
    "body": "Linen, in three colours.",
    "status": "published",
    "author_id": 3,
    "created_at": "2026-03-01T09:00:00+00:00",
    "updated_at": "2026-03-01T09:00:00+00:00",
    "published_at": "2026-03-01T09:00:00+00:00",
    "author": {"id": 3, "name": "Ada"},
    "tags": [{"id": 1, "name": "news"}],
}
ONE = {"data": ARTICLE}
ARTICLE_BODY = {
    "title": "The spring collection",
    "body": "Linen, in three colours.",
    "status": "published",
    "tags": ["news"],
}
COMMENT = {
    "id": 7,
    "article_id": 12,
    "author_name": "Grace",
    "body": "Is the blue one back?",
    "created_at": "2026-03-02T10:00:00+00:00",
}
# What a written article's answer shows.
SHOWN = ["author", "tags"]
ONE_ERRORS = resource_errors(*VERSIONED_GUARDS, NoSuchThing)
WRITE_ERRORS = resource_errors(*VERSIONED_GUARDS, NoSuchThing, SlugTaken, UnknownAuthor)


def _respond(body: Any, version: int, status_code: int = 200) -> JSONResponse:
    response = JSONResponse(body, status_code=status_code, media_type=media_type(version))
    response.headers["Vary"] = "Accept"
    return response


def _parse_include(include: str | None) -> list[str]:
    if not include:
        return []
    names = [name.strip() for name in include.split(",") if name.strip()]
    unknown = [name for name in names if name not in INCLUDABLE]
    if unknown:
        raise InvalidRequest(
            f"Unknown include: {', '.join(unknown)}; allowed: {', '.join(INCLUDABLE)}"
        )
    return list(dict.fromkeys(names))


@router.get(
    "",
    response_model=ListEnvelope,
    summary="List articles",
    description=(
        "Filters `status`, `author_id`, `created_after` (YYYY-MM-DD); offset paging (`page`,"
        " `per_page`, 20 by default, `sort`, `order`, with `meta.links`) or keyset paging"
        " (`after_id`, `limit`, by id; `meta.next_after_id` is null on the last page);"
        " `include=author,tags,comments`. `Accept: application/vnd.commerce.v2+json` asks for"
        " version 2."
    ),
    responses={
        **versioned_content(
            "ListEnvelope",
            example={"data": [ARTICLE], "meta": {"limit": 20, "next_after_id": None}},
        ),
        **resource_errors(*VERSIONED_GUARDS),
    },
)
async def list_articles(
    request: Request,
    caller: AnyCaller,
    service: ArticleServiceDep,
    version: Version,
    status_: Annotated[ArticleStatus | None, Query(alias="status")] = None,
    author_id: OptionalDbIdQuery = None,
    created_after: Annotated[str | None, Query(description="YYYY-MM-DD")] = None,
    # Enums for the OpenAPI document; checked by the service so the refusal names the choices.
    sort: Annotated[
        str | None,
        Query(description=f"One of {', '.join(SORTABLE)}", json_schema_extra={"enum": SORTABLE}),
    ] = None,
    order: Annotated[
        str | None, Query(description="asc or desc", json_schema_extra={"enum": ["asc", "desc"]})
    ] = None,
    include: Annotated[str | None, Query(description="author,tags,comments")] = None,
    # Bounded so the offset, (page - 1) * per_page, stays a number Postgres takes.
    page: Annotated[int | None, Query(ge=1, le=MAX_DB_INT)] = None,
    per_page: Annotated[int | None, Query(ge=1, le=MAX_PER_PAGE)] = None,
    after_id: OptionalDbIdQuery = None,
    limit: Annotated[int | None, Query(ge=1, le=MAX_PER_PAGE)] = None,
) -> JSONResponse:
    """Offset paging (`page`, `per_page`) or keyset paging (`after_id`, `limit`, by id)."""
    query = ArticleQuery(
        status_, author_id, created_after, sort, order, page, per_page, after_id, limit
    )
    names = _parse_include(include)
    relations = relations_for(version, names)
    meta: dict[str, Any]
    if query.keyset:
        keyset = await service.list_keyset(query, relations)
        rows = keyset.items
        next_after = int(keyset.next_cursor) if keyset.next_cursor is not None else None
        meta = {"limit": query.limit or DEFAULT_PAGE_SIZE, "next_after_id": next_after}
    else:
        offset = await service.list_offset(query, relations)
        rows = list(offset.articles)
        meta = _offset_meta(request, offset)
    return _respond({"data": [render(a, version, names) for a in rows], "meta": meta}, version)


def _offset_meta(request: Request, page: OffsetPage) -> dict[str, Any]:
    def link(to: int) -> str:
        return str(request.url.include_query_params(page=to, per_page=page.per_page))

    return {
        "total": page.total,
        "page": page.page,
        "per_page": page.per_page,
        "links": {
            "self": link(page.page),
            "first": link(1),
            "prev": link(page.page - 1) if page.page > 1 else None,
            "next": link(page.page + 1) if page.page < page.last else None,
            "last": link(page.last),
        },
    }


@router.post(
    "",
    response_model=SingleEnvelope,
    status_code=status.HTTP_201_CREATED,
    summary="Create an article",
    description=(
        "Managers and admins. `slug` is made from the title when absent; `author_id` defaults"
        " to the calling user; `tags` are names, created as needed. Publishes"
        " `article.created`."
    ),
    openapi_extra={"requestBody": {"content": {"application/json": {"example": ARTICLE_BODY}}}},
    responses={
        **versioned_content("SingleEnvelope", 201, ONE),
        **resource_errors(*VERSIONED_GUARDS, SlugTaken, UnknownAuthor),
    },
)
async def create_article(
    body: ArticleCreate, caller: ManagerCaller, service: ArticleServiceDep, version: Version
) -> JSONResponse:
    article = await service.create_loaded(body, caller, relations_for(version, SHOWN))
    return _respond({"data": render(article, version, SHOWN)}, version, 201)


@router.get(
    "/{article_id}",
    response_model=SingleEnvelope,
    summary="Get an article",
    description="One article; `include=author,tags,comments` embeds its relations.",
    responses={**versioned_content("SingleEnvelope", example=ONE), **ONE_ERRORS},
)
async def get_article(
    article_id: DbId,
    caller: AnyCaller,
    service: ArticleServiceDep,
    version: Version,
    include: Annotated[str | None, Query(description="author,tags,comments")] = None,
) -> JSONResponse:
    names = _parse_include(include)
    article = await service.get(article_id, relations_for(version, names))
    return _respond({"data": render(article, version, names)}, version)


@router.put(
    "/{article_id}",
    response_model=SingleEnvelope,
    summary="Replace an article",
    description=(
        "Managers and admins. Every field is required; the answer shows the author and tags."
        " Publishes `article.updated`."
    ),
    openapi_extra={
        "requestBody": {
            "content": {"application/json": {"example": {**ARTICLE_BODY, "slug": "spring"}}}
        }
    },
    responses={**versioned_content("SingleEnvelope", example=ONE), **WRITE_ERRORS},
)
async def replace_article(
    article_id: DbId,
    body: ArticleReplace,
    caller: ManagerCaller,
    service: ArticleServiceDep,
    version: Version,
) -> JSONResponse:
    article = await service.replace(article_id, body, relations_for(version, SHOWN))
    return _respond({"data": render(article, version, SHOWN)}, version)


@router.patch(
    "/{article_id}",
    response_model=SingleEnvelope,
    summary="Change an article",
    description=("Managers and admins. Only the fields given change. Publishes `article.updated`."),
    openapi_extra={
        "requestBody": {"content": {"application/json": {"example": {"status": "archived"}}}}
    },
    responses={**versioned_content("SingleEnvelope", example=ONE), **WRITE_ERRORS},
)
async def update_article(
    article_id: DbId,
    body: ArticleUpdate,
    caller: ManagerCaller,
    service: ArticleServiceDep,
    version: Version,
) -> JSONResponse:
    article = await service.update(article_id, body, relations_for(version, SHOWN))
    return _respond({"data": render(article, version, SHOWN)}, version)


@router.delete(
    "/{article_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
    summary="Delete an article",
    description="Managers and admins; its comments go with it. Publishes `article.deleted`.",
    responses=ONE_ERRORS,
)
async def delete_article(
    article_id: DbId, caller: ManagerCaller, service: ArticleServiceDep
) -> None:
    await service.delete(article_id)


@router.get(
    "/{article_id}/comments",
    response_model=ListEnvelope,
    summary="List an article's comments",
    description="Oldest first, all of them (`meta.total`).",
    responses={
        **versioned_content("ListEnvelope", example={"data": [COMMENT], "meta": {"total": 1}}),
        **ONE_ERRORS,
    },
)
async def list_comments(
    article_id: DbId, caller: AnyCaller, service: ArticleServiceDep, version: Version
) -> JSONResponse:
    comments = await service.comments(article_id)
    data = [comment_out(c).model_dump(mode="json") for c in comments]
    return _respond({"data": data, "meta": {"total": len(data)}}, version)


@router.post(
    "/{article_id}/comments",
    response_model=SingleEnvelope,
    status_code=status.HTTP_201_CREATED,
    summary="Comment on an article",
    description=(
        "Any user. `author_name` defaults to the caller (the user id of a JWT, the owner of"
        " an API key)."
    ),
    openapi_extra={
        "requestBody": {
            "content": {"application/json": {"example": {"body": "Is the blue one back?"}}}
        }
    },
    responses={**versioned_content("SingleEnvelope", 201, {"data": COMMENT}), **ONE_ERRORS},
)
async def add_comment(
    article_id: DbId,
    body: CommentCreate,
    caller: UserCaller,
    service: ArticleServiceDep,
    version: Version,
) -> JSONResponse:
    comment = await service.add_comment(article_id, body, caller)
    return _respond({"data": comment_out(comment).model_dump(mode="json")}, version, 201)
