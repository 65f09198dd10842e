"""`GET /api/v1/products`: the catalogue in the resource API's conventions (token required,
`{data, meta}` envelope, keyset paging by id, `include=variants`)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query
from fastapi.responses import JSONResponse
from servicekit.errors import BadRequest
from servicekit.web.params import OptionalDbIdQuery
from servicekit.web.session import SessionDep

from commerce_content.articles.schemas import ListEnvelope
from commerce_content.errors import RESOURCE_ERRORS
from commerce_content.identity.dependencies import AnyCaller
from commerce_content.identity.roles import Role
from commerce_content.models import Product
from commerce_content.orders.checkout import unit_price
from commerce_content.products.repository import (
    KeysetWindow,
    ProductCriteria,
    ProductRepository,
    VariantRecord,
)
from commerce_content.rate_limit.limiter import enforce_rate_limit

router = APIRouter(
    prefix="/products",
    tags=["products"],
    responses=RESOURCE_ERRORS,
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


@router.get("", response_model=ListEnvelope)
async def list_products(
    caller: AnyCaller,
    session: SessionDep,
    after_id: OptionalDbIdQuery = None,
    limit: Annotated[int | None, Query(ge=1, le=MAX_LIMIT)] = None,
    include: Annotated[str | None, Query(description="variants")] = None,
) -> JSONResponse:
    """Published products in id order, `limit` (20, at most 100) after `after_id`; managers
    also see drafts."""
    names = [n.strip() for n in (include or "").split(",") if n.strip()]
    unknown = [n for n in names if n not in INCLUDABLE]
    if unknown:
        raise BadRequest(f"Unknown include: {', '.join(unknown)}; allowed: {', '.join(INCLUDABLE)}")
    size = limit or DEFAULT_LIMIT
    repository = ProductRepository(session)
    criteria = ProductCriteria(include_unpublished=caller.role.allows(Role.MANAGER))
    rows = (await repository.page(criteria, KeysetWindow(limit=size, after_id=after_id)))[:size]
    grouped = (
        await repository.variants_of([p.id or 0 for p in rows]) if "variants" in names else None
    )
    data = [render(p, grouped.get(p.id or 0, []) if grouped is not None else None) for p in rows]
    next_after = rows[-1].id if len(rows) == size else None
    return JSONResponse({"data": data, "meta": {"limit": size, "next_after_id": next_after}})
