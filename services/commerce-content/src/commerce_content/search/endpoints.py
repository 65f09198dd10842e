"""`GET /api/search`."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import BaseModel

from commerce_content.dependencies import SearchServiceDep
from commerce_content.errors import InvalidRequest, plain_errors
from commerce_content.search.service import COLLECTIONS

router = APIRouter(tags=["search"])


class SearchResult(BaseModel):
    docs: list[dict[str, Any]]
    totalDocs: int


@router.get("/search", response_model=SearchResult, responses=plain_errors(InvalidRequest))
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
