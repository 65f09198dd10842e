"""The event catalog: the types this owner may subscribe to, searchable, each with its schema
and example payload."""

from __future__ import annotations

import json
from typing import Annotated

from fastapi import Query, Request
from fastapi.responses import HTMLResponse
from servicekit.auth.api_keys import AccessLevel
from servicekit.web.pages import PagesDep, PageSessionDep, page_router

from webhook_hub.event_types.dependencies import EventTypeServiceDep
from webhook_hub.event_types.service import matching
from webhook_hub.portal.routes.common import principal

router = page_router()


@router.get("/event-types")
async def event_types(
    request: Request,
    pages: PagesDep,
    session: PageSessionDep,
    types: EventTypeServiceDep,
    q: Annotated[str, Query(max_length=200)] = "",
) -> HTMLResponse:
    active = [t for t in await types.visible_to(principal(session)) if t.is_active]
    catalog = matching(active, q)
    context = {
        "title": "Event catalog",
        "q": q.strip(),
        "total": len(active),
        "event_types": [
            {
                "type": t,
                "schema": json.dumps(t.schema_, indent=2, ensure_ascii=False),
                "example": json.dumps(t.example_payload, indent=2, ensure_ascii=False),
            }
            for t in catalog
        ],
        "can_write": session.can(AccessLevel.WRITE),
    }
    return pages.render(request, "portal/event_types.html", context)
