"""`GET /api/search`."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import BaseModel
from servicekit.errors import BadRequest
from servicekit.web.session import SessionDep

from commerce_content.errors import PLAIN_ERRORS
from commerce_content.search.service import COLLECTIONS, MIN_QUERY_LENGTH, search

router = APIRouter(tags=["search"])


class SearchResult(BaseModel):
    docs: list[dict[str, Any]]
    totalDocs: int


@router.get("/search", response_model=SearchResult, responses=PLAIN_ERRORS)
async def search_collections(
    session: SessionDep,
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
    if type != "all" and type not in COLLECTIONS:
        raise BadRequest(f"Unknown type '{type}'; use all, {', '.join(COLLECTIONS)}")
    if q is None or len(q.strip()) < MIN_QUERY_LENGTH:
        return SearchResult(docs=[], totalDocs=0)
    docs = await search(session, q.strip(), COLLECTIONS if type == "all" else (type,))
    return SearchResult(docs=docs, totalDocs=len(docs))
