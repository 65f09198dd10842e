"""The CEL editor's pages: a subscription's `filter` and `transform`, run against a sample
event before saving (`portal/expression_editor.py` runs them); writing is needed to preview
or save (a preview runs the expression on the server)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request
from fastapi.responses import HTMLResponse, Response
from servicekit.web.pages import Pages, PagesDep, PageSession, PageSessionDep, page_router

from webhook_hub.errors import InvalidExpression
from webhook_hub.event_types.dependencies import EventTypeServiceDep
from webhook_hub.event_types.service import EventTypeService
from webhook_hub.models import Subscription
from webhook_hub.portal.expression_editor import (
    Outcome,
    Preview,
    expression_counts,
    run_preview,
    sample_data,
)
from webhook_hub.portal.routes.common import (
    FormText,
    SettingsSaveDep,
    WritableSubscription,
    principal,
)
from webhook_hub.subscriptions.dependencies import SubscriptionServiceDep
from webhook_hub.subscriptions.service import SubscriptionService, example_choices


@dataclass(frozen=True)
class ExpressionEditor:
    """The editor's page for the request's subscription, drawn with what was typed."""

    request: Request
    pages: Pages
    session: PageSession
    service: SubscriptionService
    types: EventTypeService
    subscription: Subscription

    async def render(
        self,
        filter_source: str,
        transform_source: str,
        *,
        errors: dict[str, Outcome] | None = None,
        status_code: int = 200,
    ) -> HTMLResponse:
        catalog = await self.types.visible_to(principal(self.session))
        offered = example_choices(self.subscription, catalog)
        context = {
            "title": "Filter and transform",
            "subscription": self.subscription,
            "filter_source": filter_source,
            "transform_source": transform_source,
            "example_types": offered,
            "examples": {
                t.name: json.dumps(t.example_payload, indent=2, ensure_ascii=False) for t in offered
            },
            "counts": await expression_counts(self.service, self.subscription.id),
            "errors": errors or {},
        }
        return self.pages.render(
            self.request, "portal/subscription_expressions.html", context, status_code=status_code
        )


async def expression_editor(
    request: Request,
    pages: PagesDep,
    session: PageSessionDep,
    service: SubscriptionServiceDep,
    types: EventTypeServiceDep,
    subscription: WritableSubscription,
) -> ExpressionEditor:
    return ExpressionEditor(request, pages, session, service, types, subscription)


ExpressionEditorDep = Annotated[ExpressionEditor, Depends(expression_editor)]

router = page_router()


@router.get("/endpoints/{subscription_id}/expressions")
async def expressions_page(editor: ExpressionEditorDep) -> HTMLResponse:
    subscription = editor.subscription
    return await editor.render(subscription.filter or "", subscription.transform or "")


@router.post("/endpoints/{subscription_id}/expressions")
async def save_expressions(
    editor: ExpressionEditorDep,
    save: SettingsSaveDep,
    filter: FormText = "",
    transform: FormText = "",
) -> Response:
    def body() -> dict[str, str | None]:
        return {"filter": filter.strip() or None, "transform": transform.strip() or None}

    answer = await save(body, (InvalidExpression,), "Filter and transform saved.")
    if isinstance(answer, Response):  # saved
        return answer
    error = Outcome(
        answer.extra["field"],
        error=answer.extra["reason"],
        line=answer.extra["line"],
        column=answer.extra["column"],
    )
    return await editor.render(filter, transform, errors={error.field: error}, status_code=422)


@router.post("/endpoints/{subscription_id}/expressions/preview")
async def preview_expressions(
    request: Request,
    pages: PagesDep,
    session: PageSessionDep,
    types: EventTypeServiceDep,
    subscription: WritableSubscription,
    filter: FormText = "",
    transform: FormText = "",
    sample_type: FormText = "",
    sample: FormText = "",
) -> HTMLResponse:
    offered = example_choices(subscription, await types.visible_to(principal(session)))
    example = next((t for t in offered if t.name == sample_type), None)
    try:
        data = sample_data(sample, example)
    except ValueError as exc:
        result = Preview([], None, sample_error=str(exc))
    else:
        name = example.name if example is not None else (sample_type or "sample.event")
        result = run_preview(filter, transform, name, data, session.owner)
    return pages.render(request, "portal/_expression_preview.html", {"preview": result})
