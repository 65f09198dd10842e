"""`/api/v1/articles`: the resource API conventions of the spec, thin over ArticleService."""

from __future__ import annotations

import math
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response, status
from fastapi.responses import JSONResponse
from servicekit.errors import BadRequest
from servicekit.web.params import MAX_DB_INT, DbId, OptionalDbIdQuery
from servicekit.web.session import SessionDep

from commerce_content.articles.representation import comment_out, relations_for, render
from commerce_content.articles.schemas import (
    INCLUDABLE,
    SORTABLE,
    ArticleCreate,
    ArticleReplace,
    ArticleStatus,
    ArticleUpdate,
    CommentCreate,
    ListEnvelope,
    SingleEnvelope,
)
from commerce_content.articles.service import ArticleService, parse_created_after
from commerce_content.articles.versioning import (
    media_type,
    negotiate_version,
    versioned_content,
)
from commerce_content.errors import RESOURCE_ERRORS
from commerce_content.identity.dependencies import AnyCaller, ManagerCaller, UserCaller
from commerce_content.rate_limit.limiter import enforce_rate_limit

router = APIRouter(
    prefix="/articles",
    tags=["articles"],
    dependencies=[Depends(enforce_rate_limit)],
    responses=RESOURCE_ERRORS,
)
Version = Annotated[int, Depends(negotiate_version)]
MAX_PER_PAGE = 100


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
        raise BadRequest(f"Unknown include: {', '.join(unknown)}; allowed: {', '.join(INCLUDABLE)}")
    return list(dict.fromkeys(names))


@router.get("", response_model=ListEnvelope, responses=versioned_content("ListEnvelope"))
async def list_articles(
    request: Request,
    caller: AnyCaller,
    session: SessionDep,
    version: Version,
    status_: Annotated[ArticleStatus | None, Query(alias="status")] = None,
    author_id: OptionalDbIdQuery = None,
    created_after: Annotated[str | None, Query(description="YYYY-MM-DD")] = None,
    # Enums for the OpenAPI document; checked below so the refusal names the choices.
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
    try:
        since = parse_created_after(created_after)
    except ValueError as exc:
        raise BadRequest(str(exc)) from exc
    if sort is not None and sort not in SORTABLE:
        raise BadRequest(f"Cannot sort by '{sort}'; allowed: {', '.join(SORTABLE)}")
    if order is not None and order not in ("asc", "desc"):
        raise BadRequest("order must be asc or desc")
    names = _parse_include(include)
    relations = relations_for(version, names)
    repository = ArticleService(session).articles
    keyset = after_id is not None or limit is not None
    if keyset:
        if page is not None or per_page is not None or sort is not None:
            raise BadRequest(
                "Keyset paging (after_id, limit) orders by id; drop page, per_page, sort"
            )
        size = limit or 20
        rows = await repository.after(
            status=status_,
            author_id=author_id,
            created_after=since,
            after_id=after_id or 0,
            limit=size,
            include=relations,
        )
        next_after = rows[-1].id if len(rows) == size else None
        meta: dict[str, Any] = {"limit": size, "next_after_id": next_after}
    else:
        size = per_page or 20
        number = page or 1
        total = await repository.count(status_, author_id, since)
        rows = await repository.page(
            status=status_,
            author_id=author_id,
            created_after=since,
            sort=sort or "id",
            descending=order == "desc",
            offset=(number - 1) * size,
            limit=size,
            include=relations,
        )
        last = max(1, math.ceil(total / size))

        def link(to: int) -> str:
            return str(request.url.include_query_params(page=to, per_page=size))

        meta = {
            "total": total,
            "page": number,
            "per_page": size,
            "links": {
                "self": link(number),
                "first": link(1),
                "prev": link(number - 1) if number > 1 else None,
                "next": link(number + 1) if number < last else None,
                "last": link(last),
            },
        }
    return _respond({"data": [render(a, version, names) for a in rows], "meta": meta}, version)


@router.post(
    "",
    response_model=SingleEnvelope,
    status_code=status.HTTP_201_CREATED,
    responses=versioned_content("SingleEnvelope", 201),
)
async def create_article(
    body: ArticleCreate, caller: ManagerCaller, session: SessionDep, version: Version
) -> JSONResponse:
    service = ArticleService(session)
    article = await service.create(body, caller)
    assert article.id is not None
    loaded = await service.get(article.id, relations_for(version, ["author", "tags"]))
    return _respond({"data": render(loaded, version, ["author", "tags"])}, version, 201)


@router.get(
    "/{article_id}", response_model=SingleEnvelope, responses=versioned_content("SingleEnvelope")
)
async def get_article(
    article_id: DbId,
    caller: AnyCaller,
    session: SessionDep,
    version: Version,
    include: Annotated[str | None, Query(description="author,tags,comments")] = None,
) -> JSONResponse:
    names = _parse_include(include)
    article = await ArticleService(session).get(article_id, relations_for(version, names))
    return _respond({"data": render(article, version, names)}, version)


@router.put(
    "/{article_id}", response_model=SingleEnvelope, responses=versioned_content("SingleEnvelope")
)
async def replace_article(
    article_id: DbId,
    body: ArticleReplace,
    caller: ManagerCaller,
    session: SessionDep,
    version: Version,
) -> JSONResponse:
    service = ArticleService(session)
    await service.replace(article_id, body)
    session.expunge_all()
    article = await service.get(article_id, relations_for(version, ["author", "tags"]))
    return _respond({"data": render(article, version, ["author", "tags"])}, version)


@router.patch(
    "/{article_id}", response_model=SingleEnvelope, responses=versioned_content("SingleEnvelope")
)
async def update_article(
    article_id: DbId,
    body: ArticleUpdate,
    caller: ManagerCaller,
    session: SessionDep,
    version: Version,
) -> JSONResponse:
    service = ArticleService(session)
    await service.update(article_id, body)
    session.expunge_all()
    article = await service.get(article_id, relations_for(version, ["author", "tags"]))
    return _respond({"data": render(article, version, ["author", "tags"])}, version)


@router.delete("/{article_id}", status_code=status.HTTP_204_NO_CONTENT, response_class=Response)
async def delete_article(article_id: DbId, caller: ManagerCaller, session: SessionDep) -> None:
    await ArticleService(session).delete(article_id)


@router.get(
    "/{article_id}/comments",
    response_model=ListEnvelope,
    responses=versioned_content("ListEnvelope"),
)
async def list_comments(
    article_id: DbId, caller: AnyCaller, session: SessionDep, version: Version
) -> JSONResponse:
    service = ArticleService(session)
    await service.get(article_id)
    comments = await service.articles.comments(article_id)
    data = [comment_out(c).model_dump(mode="json") for c in comments]
    return _respond({"data": data, "meta": {"total": len(data)}}, version)


@router.post(
    "/{article_id}/comments",
    response_model=SingleEnvelope,
    status_code=status.HTTP_201_CREATED,
    responses=versioned_content("SingleEnvelope", 201),
)
async def add_comment(
    article_id: DbId,
    body: CommentCreate,
    caller: UserCaller,
    session: SessionDep,
    version: Version,
) -> JSONResponse:
    comment = await ArticleService(session).add_comment(article_id, body, caller)
    return _respond({"data": comment_out(comment).model_dump(mode="json")}, version, 201)
