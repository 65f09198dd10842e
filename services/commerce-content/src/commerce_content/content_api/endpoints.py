"""`GET /api/products/` (the content API) and `/api/content/products` (its admin side)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, BackgroundTasks, Depends, Request
from fastapi.responses import JSONResponse
from servicekit.errors import BadRequest, Conflict, NotFound, ServiceError
from servicekit.web.params import MAX_DB_INT, DbId
from servicekit.web.session import SessionDep
from sqlalchemy import func
from sqlmodel import col, select

from commerce_content.content_api.auth import content_caller
from commerce_content.content_api.notifier import notify_content_saved
from commerce_content.content_api.schemas import (
    ContentItemPatch,
    ContentItemSaved,
    ContentItemWrite,
    ProductItem,
    ProductList,
    ProductOne,
    SearchItem,
)
from commerce_content.errors import PLAIN_CONFLICT, PLAIN_ERRORS, PLAIN_NOT_FOUND
from commerce_content.identity.dependencies import Caller, ManagerCaller
from commerce_content.models import Product
from commerce_content.products.service import (
    ProductProblem,
    ProductProblemCode,
    ProductService,
    SavedProduct,
)
from commerce_content.search.service import like_pattern
from commerce_content.settings import Settings

router = APIRouter(tags=["content"])
DEFAULT_LIMIT = 20
MAX_LIMIT = 100
NO_STORE = {"Cache-Control": "no-store"}
JSON_UTF8 = "application/json; charset=utf-8"


def _int(raw: str | None, default: int) -> int:
    """Non-numeric values fall back to the default, as the CMS APIs this mirrors do."""
    try:
        value = int(raw) if raw is not None else default
    except ValueError:
        return default
    return value if abs(value) <= MAX_DB_INT else default


@router.get(
    "/products/",
    response_model=ProductList | ProductOne,
    responses={**PLAIN_ERRORS, **PLAIN_NOT_FOUND},
)
async def content_products(
    request: Request,
    session: SessionDep,
    caller: Annotated[Caller, Depends(content_caller)],
) -> JSONResponse:
    """`action` list (default; anything else than `get` is list) or get; `id` (get), `limit`
    (20, at most 100), `offset` (0), `search` (title contains it; items then carry id, title,
    price)."""
    settings: Settings = request.app.state.settings
    params = request.query_params
    action = params.get("action", "list")
    catalog = select(Product).where(
        Product.parent_id == settings.catalog_parent_id,
        col(Product.published),
        col(Product.deleted).is_(False),
    )
    if action == "get":
        item_id = _int(params.get("id"), 0)
        product = (await session.exec(catalog.where(Product.id == item_id))).first()
        if product is None:
            raise NotFound("Not found")
        body: dict[str, Any] = ProductOne(
            item=ProductItem.of(product, settings.frontend_url)
        ).model_dump()
        return JSONResponse(body, headers=NO_STORE, media_type=JSON_UTF8)
    limit = _int(params.get("limit"), DEFAULT_LIMIT)
    limit = DEFAULT_LIMIT if limit < 1 else min(limit, MAX_LIMIT)
    offset = max(0, _int(params.get("offset"), 0))
    search = params.get("search", "").strip()
    if search:
        catalog = catalog.where(col(Product.name).ilike(like_pattern(search), escape="\\"))
    total = (await session.exec(select(func.count()).select_from(catalog.subquery()))).one()
    rows = (
        await session.exec(
            catalog.order_by(col(Product.menu_index), col(Product.id)).offset(offset).limit(limit)
        )
    ).all()
    items: list[ProductItem] | list[SearchItem]
    if search:
        items = [
            SearchItem(id=p.id or 0, title=p.name, price=ProductItem.of(p, "").price) for p in rows
        ]
    else:
        items = [ProductItem.of(p, settings.frontend_url) for p in rows]
    body = ProductList(total=int(total), limit=limit, offset=offset, items=items).model_dump()
    return JSONResponse(body, headers=NO_STORE, media_type=JSON_UTF8)


def _problem(problem: ProductProblem) -> ServiceError:
    if problem.code == ProductProblemCode.NOT_FOUND:
        return NotFound("Content item not found")
    if problem.code == ProductProblemCode.DUPLICATE_SLUG:
        return Conflict(problem.message)
    return BadRequest(problem.message)


def _saved(
    saved: SavedProduct, settings: Settings, background: BackgroundTasks
) -> ContentItemSaved:
    product = saved.product
    assert product.id is not None
    # After the response (and so after the commit): a slow receiver never delays the editor.
    background.add_task(
        notify_content_saved, settings, saved.kind, product.id, product.slug, product.published
    )
    return ContentItemSaved(
        id=product.id, alias=product.slug, published=product.published, deleted=product.deleted
    )


@router.post(
    "/content/products",
    response_model=ContentItemSaved,
    status_code=201,
    responses={**PLAIN_ERRORS, **PLAIN_CONFLICT},
)
async def create_content_item(
    body: ContentItemWrite,
    caller: ManagerCaller,
    session: SessionDep,
    request: Request,
    background: BackgroundTasks,
) -> ContentItemSaved:
    settings: Settings = request.app.state.settings
    try:
        saved = await ProductService(session, settings).create(body.model_dump())
    except ProductProblem as problem:
        raise _problem(problem) from problem
    return _saved(saved, settings, background)


@router.patch(
    "/content/products/{item_id}",
    response_model=ContentItemSaved,
    responses={**PLAIN_ERRORS, **PLAIN_NOT_FOUND, **PLAIN_CONFLICT},
)
async def update_content_item(
    item_id: DbId,
    body: ContentItemPatch,
    caller: ManagerCaller,
    session: SessionDep,
    request: Request,
    background: BackgroundTasks,
) -> ContentItemSaved:
    settings: Settings = request.app.state.settings
    try:
        saved = await ProductService(session, settings).update(
            item_id, body.model_dump(exclude_unset=True)
        )
    except ProductProblem as problem:
        raise _problem(problem) from problem
    return _saved(saved, settings, background)
