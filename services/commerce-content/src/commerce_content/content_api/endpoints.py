"""`GET /api/products/` (the content API) and `/api/content/products` (its admin side): thin
over ProductService."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, BackgroundTasks, Depends, Request
from fastapi.responses import JSONResponse
from servicekit.web.params import MAX_DB_INT, DbId

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
from commerce_content.errors import (
    DuplicateSlug,
    InvalidProduct,
    InvalidRequest,
    NotAuthenticated,
    NotPermitted,
    ProductNotFound,
    TooManyRequests,
    UnknownCategory,
    plain_errors,
)
from commerce_content.identity.dependencies import Caller, ManagerCaller
from commerce_content.openapi import documented, with_errors
from commerce_content.products.dependencies import ProductServiceDep
from commerce_content.products.service import SavedProduct
from commerce_content.settings import Settings, SettingsDep

router = APIRouter(tags=["content"])
DEFAULT_LIMIT = 20
MAX_LIMIT = 100
NO_STORE = {"Cache-Control": "no-store"}
JSON_UTF8 = "application/json; charset=utf-8"
GUARDS = (InvalidRequest, NotAuthenticated, NotPermitted, TooManyRequests)


CONTENT_ITEM = {
    "name": "Ceramic mug",
    "slug": "ceramic-mug",
    "description": "Holds 350 ml.",
    "base_price": "19.99",
    "stock": 12,
    "published": True,
}
SAVED = {"id": 21, "alias": "ceramic-mug", "published": True, "deleted": False}


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
    **with_errors(
        documented(
            "Read the published catalogue",
            "`action` list (default; anything else than `get` is list) or get; `id` (get),"
            " `limit` (20, at most 100), `offset` (0), `search` (title contains it; items then"
            " carry id, title, price). `X-API-Key` or `Authorization: Bearer <JWT>`; not"
            " cached.",
            response={
                "total": 1,
                "limit": 20,
                "offset": 0,
                "items": [
                    {
                        "id": 21,
                        "title": "Ceramic mug",
                        "slug": "ceramic-mug",
                        "description": "Holds 350 ml.",
                        "price": 19.99,
                        "image": "/media/mug.jpg",
                        "url": "http://127.0.0.1:3000/products/ceramic-mug",
                    }
                ],
            },
        ),
        plain_errors(*GUARDS, ProductNotFound),
    ),
)
async def content_products(
    request: Request,
    service: ProductServiceDep,
    settings: SettingsDep,
    caller: Annotated[Caller, Depends(content_caller)],
) -> JSONResponse:
    """`action` list (default; anything else than `get` is list) or get; `id` (get), `limit`
    (20, at most 100), `offset` (0), `search` (title contains it; items then carry id, title,
    price)."""
    params = request.query_params
    if params.get("action", "list") == "get":
        product = await service.catalog_item(_int(params.get("id"), 0))
        one = ProductOne(item=ProductItem.of(product, settings.frontend_url))
        return JSONResponse(one.model_dump(), headers=NO_STORE, media_type=JSON_UTF8)
    limit = _int(params.get("limit"), DEFAULT_LIMIT)
    limit = DEFAULT_LIMIT if limit < 1 else min(limit, MAX_LIMIT)
    offset = max(0, _int(params.get("offset"), 0))
    search = params.get("search", "").strip()
    page = await service.catalog(offset, limit, search)
    items: list[ProductItem] | list[SearchItem]
    if search:
        items = [
            SearchItem(id=p.id, title=p.name, price=ProductItem.of(p, "").price)
            for p in page.products
        ]
    else:
        items = [ProductItem.of(p, settings.frontend_url) for p in page.products]
    body = ProductList(total=page.total, limit=limit, offset=offset, items=items).model_dump()
    return JSONResponse(body, headers=NO_STORE, media_type=JSON_UTF8)


def _saved(
    saved: SavedProduct, settings: Settings, background: BackgroundTasks
) -> ContentItemSaved:
    product = saved.product
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
    **with_errors(
        documented(
            "Create a content item",
            "Managers and admins. A product under the catalogue parent; a draft unless"
            " `published`. The content-saved notification goes out after the commit.",
            request=CONTENT_ITEM,
            response=SAVED,
            status=201,
        ),
        plain_errors(*GUARDS, InvalidProduct, UnknownCategory, DuplicateSlug),
    ),
)
async def create_content_item(
    body: ContentItemWrite,
    caller: ManagerCaller,
    service: ProductServiceDep,
    settings: SettingsDep,
    background: BackgroundTasks,
) -> ContentItemSaved:
    saved = await service.create(body.model_dump())
    return _saved(saved, settings, background)


@router.patch(
    "/content/products/{item_id}",
    response_model=ContentItemSaved,
    **with_errors(
        documented(
            "Change a content item",
            "Managers and admins. Only the fields given change; `sale_price: null` clears the"
            " sale price. The content-saved notification goes out after the commit.",
            request={"base_price": "17.50", "published": True},
            response=SAVED,
        ),
        plain_errors(*GUARDS, InvalidProduct, UnknownCategory, ProductNotFound, DuplicateSlug),
    ),
)
async def update_content_item(
    item_id: DbId,
    body: ContentItemPatch,
    caller: ManagerCaller,
    service: ProductServiceDep,
    settings: SettingsDep,
    background: BackgroundTasks,
) -> ContentItemSaved:
    saved = await service.update(item_id, body.model_dump(exclude_unset=True))
    return _saved(saved, settings, background)
