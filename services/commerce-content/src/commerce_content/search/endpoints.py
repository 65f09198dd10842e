"""`GET /api/search`."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import BaseModel

from commerce_content.errors import InvalidRequest, plain_errors
from commerce_content.openapi import documented, with_errors
from commerce_content.search.dependencies import SearchServiceDep
from commerce_content.search.service import COLLECTIONS

router = APIRouter(tags=["search"])


class SearchResult(BaseModel):
    docs: list[dict[str, Any]]
    totalDocs: int


@router.get(
    "/search",
    response_model=SearchResult,
    **with_errors(
        documented(
            "Search posts, products and pages",
            "`q` of at least 2 characters (else nothing is found), matched case-insensitively"
            " in title or description; `type` all (default), posts, products or pages; at most"
            " 5 records per collection, each with `_collection`.",
            response={
                "docs": [
                    {
                        "id": 21,
                        "title": "Ceramic mug",
                        "slug": "ceramic-mug",
                        "description": "Holds 350 ml.",
                        "base_price": "19.99",
                        "sale_price": None,
                        "currency": "USD",
                        "image": "/media/mug.jpg",
                        "_collection": "products",
                    }
                ],
                "totalDocs": 1,
            },
        ),
        plain_errors(InvalidRequest),
    ),
)
async def search_collections(
    service: SearchServiceDep,
    q: Annotated[str | None, Query(max_length=200)] = None,
    # Declared as an enum for clients; checked below so the refusal names the choices.
    type: Annotated[
        str,
        Query(
            description="all, posts, products or pages",
            json_schema_extra={"enum": ["all", *COLLECTIONS]},
        ),
    ] = "all",
) -> SearchResult:
    docs = await service.search(q, type)
    return SearchResult(docs=docs, totalDocs=len(docs))
