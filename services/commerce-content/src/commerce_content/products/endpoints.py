"""`GET /api/v1/products`: the catalogue in the resource API's conventions (token required,
`{data, meta}` envelope, keyset paging by id, `include=variants`)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query
from fastapi.responses import JSONResponse
from servicekit.web.params import OptionalDbIdQuery

from commerce_content.articles.schemas import ListEnvelope
from commerce_content.errors import RESOURCE_GUARDS, InvalidRequest, resource_errors
from commerce_content.identity.dependencies import AnyCaller
from commerce_content.identity.roles import Role
from commerce_content.models import Product
from commerce_content.openapi import documented
from commerce_content.orders.checkout import unit_price
from commerce_content.products.dependencies import ProductServiceDep
from commerce_content.products.repository import ProductCriteria, VariantRecord
from commerce_content.rate_limit.limiter import enforce_rate_limit

router = APIRouter(
    prefix="/products",
    tags=["products"],
    responses=resource_errors(*RESOURCE_GUARDS),
    dependencies=[Depends(enforce_rate_limit)],
)
INCLUDABLE = ("variants",)
DEFAULT_LIMIT = 20
MAX_LIMIT = 100


def _money(value: Any) -> str | None:
    return None if value is None else format(value, "f")


def render(product: Product, variants: list[VariantRecord] | None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": product.id,
        "name": product.name,
        "slug": product.slug,
        "pricing": {
            "base_price": _money(product.base_price),
            "sale_price": _money(product.sale_price),
            "currency": product.currency,
        },
    }
    if variants is not None:
        body["variants"] = [
            {
                "id": v.id,
                "sku": v.sku,
                "name": v.name,
                "price": _money(v.price if v.price is not None else unit_price(product)),
                "in_stock": v.stock > 0,
            }
            for v in variants
        ]
    return body


@router.get(
    "",
    response_model=ListEnvelope,
    **documented(
        "List products",
        "Published products in id order, `limit` (20, at most 100) after `after_id`;"
        " `meta.next_after_id` is null on the last page. Managers also see drafts."
        " `include=variants` embeds each product's variants.",
        response={
            "data": [
                {
                    "id": 21,
                    "name": "Ceramic mug",
                    "slug": "ceramic-mug",
                    "pricing": {"base_price": "19.99", "sale_price": None, "currency": "USD"},
                }
            ],
            "meta": {"limit": 20, "next_after_id": None},
        },
    ),
)
async def list_products(
    caller: AnyCaller,
    service: ProductServiceDep,
    after_id: OptionalDbIdQuery = None,
    limit: Annotated[int | None, Query(ge=1, le=MAX_LIMIT)] = None,
    include: Annotated[str | None, Query(description="variants")] = None,
) -> JSONResponse:
    """Published products in id order, `limit` (20, at most 100) after `after_id`; managers
    also see drafts."""
    names = [n.strip() for n in (include or "").split(",") if n.strip()]
    unknown = [n for n in names if n not in INCLUDABLE]
    if unknown:
        raise InvalidRequest(
            f"Unknown include: {', '.join(unknown)}; allowed: {', '.join(INCLUDABLE)}"
        )
    size = limit or DEFAULT_LIMIT
    criteria = ProductCriteria(include_unpublished=caller.role.allows(Role.MANAGER))
    page, grouped = await service.page(criteria, size, after_id, "variants" in names)
    data = [render(p, grouped.get(p.id, []) if grouped is not None else None) for p in page.items]
    next_after = int(page.next_cursor) if page.next_cursor is not None else None
    return JSONResponse({"data": data, "meta": {"limit": size, "next_after_id": next_after}})
