"""The portal's endpoints (subscriptions): the list, and the form that creates or edits one,
as the API's POST and PATCH (the same checks, each refusal shown at its field)."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import ValidationError
from servicekit.auth.api_keys import AccessLevel
from servicekit.errors import ServiceError
from servicekit.paging import DEFAULT_PAGE_SIZE
from servicekit.web.pages import Pages, PagesDep, PageSessionDep, page_router

from webhook_hub.delivery_engine.endpoint_policy import EndpointRefused
from webhook_hub.errors import EndpointNotAllowed, PersonalDataNotApproved, UnknownEventTypes
from webhook_hub.event_types.dependencies import EventTypeServiceDep
from webhook_hub.models import EventType
from webhook_hub.portal.forms import EndpointForm, subscription_form_errors
from webhook_hub.portal.presenting import probe_verdict
from webhook_hub.portal.routes.common import (
    PREFIX,
    SettingsSaveDep,
    WritableSubscription,
    principal,
    require,
    snippets,
)
from webhook_hub.portal.stats import PortalStatsServiceDep
from webhook_hub.subscriptions.dependencies import ProberDep, SubscriptionServiceDep
from webhook_hub.subscriptions.schemas import SubscriptionCreate

# What the endpoint form may refuse, each shown at its field.
FORM_REFUSALS: tuple[type[ValidationError | ServiceError | EndpointRefused], ...] = (
    ValidationError,
    EndpointRefused,
    UnknownEventTypes,
    EndpointNotAllowed,
    PersonalDataNotApproved,
)

router = page_router()


@router.get("/")
async def home(session: PageSessionDep) -> Response:
    return RedirectResponse(f"{PREFIX}/endpoints", status_code=303)


@router.get("/endpoints")
async def endpoints(
    request: Request,
    pages: PagesDep,
    session: PageSessionDep,
    service: SubscriptionServiceDep,
    stats: PortalStatsServiceDep,
    cursor: Annotated[str | None, Query(max_length=500)] = None,
) -> HTMLResponse:
    page = await service.page(
        session.owner, limit=DEFAULT_PAGE_SIZE, cursor=cursor, is_active=None, event_type=None
    )
    context = {
        "title": "Endpoints",
        "subscriptions": page.items,
        "day_totals": await stats.day_totals([s.id for s in page.items]),
        "next_cursor": page.next_cursor,
        "can_write": session.can(AccessLevel.WRITE),
    }
    return pages.render(request, "portal/endpoints.html", context)


@router.get("/endpoints/new")
async def new_endpoint(
    request: Request, pages: PagesDep, session: PageSessionDep, types: EventTypeServiceDep
) -> HTMLResponse:
    require(session, AccessLevel.WRITE)
    catalog = await types.visible_to(principal(session))
    form = EndpointForm(events=request.query_params.getlist("event"))
    return _render_form(pages, request, catalog, form, {})


@router.post("/endpoints")
async def create_endpoint(
    request: Request,
    pages: PagesDep,
    session: PageSessionDep,
    service: SubscriptionServiceDep,
    types: EventTypeServiceDep,
    prober: ProberDep,
) -> Response:
    require(session, AccessLevel.WRITE)
    form = EndpointForm.read(await request.form())
    try:
        body = SubscriptionCreate.model_validate(form.body())
        subscription, _ = await service.create(session.owner, None, body)
    except FORM_REFUSALS as exc:
        catalog = await types.visible_to(principal(session))
        errors = subscription_form_errors(exc)
        return _render_form(pages, request, catalog, form, errors, status_code=422)
    # As the API: commit before the probe, so no transaction waits on a slow endpoint.
    await service.commit()
    probe = await prober.probe(subscription.endpoint_url)
    context = {
        "title": "Endpoint created",
        "subscription": subscription,
        "secret": subscription.secret,
        "probe": probe_verdict(probe),
        "snippets": snippets(subscription.endpoint_url, subscription.id, subscription.secret),
    }
    return pages.render(request, "portal/created.html", context, status_code=201)


@router.get("/endpoints/{subscription_id}/edit")
async def edit_endpoint_form(
    request: Request,
    pages: PagesDep,
    session: PageSessionDep,
    types: EventTypeServiceDep,
    subscription: WritableSubscription,
) -> HTMLResponse:
    form = EndpointForm(
        endpoint_url=subscription.endpoint_url,
        events=list(subscription.events),
        description=subscription.description or "",
        headers=list(subscription.headers.items()),
        send_trace_context=subscription.send_trace_context,
    )
    catalog = await types.visible_to(principal(session))
    return _render_form(pages, request, catalog, form, {}, editing=subscription.id)


@router.post("/endpoints/{subscription_id}/edit")
async def edit_endpoint(
    request: Request,
    pages: PagesDep,
    session: PageSessionDep,
    types: EventTypeServiceDep,
    subscription_id: uuid.UUID,
    save: SettingsSaveDep,  # another owner's id: 404 before the form is read
) -> Response:
    form = EndpointForm.read(await request.form())
    # Every field is sent, as a PATCH naming them all: the same checks as the API's.
    answer = await save(form.body, FORM_REFUSALS, "Endpoint saved.")
    if isinstance(answer, Response):  # saved
        return answer
    catalog = await types.visible_to(principal(session))
    errors = subscription_form_errors(answer)
    return _render_form(
        pages, request, catalog, form, errors, editing=subscription_id, status_code=422
    )


def _render_form(
    pages: Pages,
    request: Request,
    catalog: Any,
    form: EndpointForm,
    errors: dict[str, str],
    *,
    editing: uuid.UUID | None = None,
    status_code: int = 200,
) -> HTMLResponse:
    types: list[EventType] = [t for t in catalog if t.is_active]
    context = {
        "title": "Edit endpoint" if editing else "New endpoint",
        "event_types": types,
        "form": form,
        "errors": errors,
        "editing": editing,
    }
    return pages.render(request, "portal/endpoint_form.html", context, status_code=status_code)
