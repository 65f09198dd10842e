"""The retry editor's pages: an endpoint's schedule and timeout (on a page of its own, where a
refused form comes back) and the owner's delivery defaults, read into the API's own bodies
(`portal/retries.py`)."""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from servicekit.auth.api_keys import AccessLevel
from servicekit.web.pages import Pages, PagesDep, PageSession, PageSessionDep, page_router

from webhook_hub.models import Subscription
from webhook_hub.portal.retries import RetryForm, defaults_editor, endpoint_retries
from webhook_hub.portal.routes.common import (
    PREFIX,
    OwnSubscription,
    WritableSubscription,
    require,
)
from webhook_hub.subscriptions.dependencies import SubscriptionServiceDep
from webhook_hub.subscriptions.schemas import DeliveryDefaults, SubscriptionUpdate

router = page_router()


@router.get("/endpoints/{subscription_id}/retries")
async def retries_page(
    request: Request,
    pages: PagesDep,
    session: PageSessionDep,
    service: SubscriptionServiceDep,
    subscription: OwnSubscription,
) -> HTMLResponse:
    return _render_endpoint(
        pages,
        request,
        session,
        subscription,
        await endpoint_retries(service, session.owner, subscription),
    )


@router.post("/endpoints/{subscription_id}/retries")
async def save_retries(
    request: Request,
    pages: PagesDep,
    session: PageSessionDep,
    service: SubscriptionServiceDep,
    subscription_id: uuid.UUID,
    subscription: WritableSubscription,
) -> Response:
    form = RetryForm.read(await request.form())
    patch, errors = form.parsed(SubscriptionUpdate)
    if patch is None:
        context = await endpoint_retries(
            service, session.owner, subscription, form=form, errors=errors
        )
        return _render_endpoint(pages, request, session, subscription, context, 422)
    await service.update(session.owner, subscription_id, patch)
    response = RedirectResponse(
        f"{PREFIX}/endpoints/{subscription_id}#retries-heading", status_code=303
    )
    pages.flash(response, "Retries and timeout saved.")
    return response


@router.get("/defaults")
async def defaults_page(
    request: Request,
    pages: PagesDep,
    session: PageSessionDep,
    service: SubscriptionServiceDep,
) -> HTMLResponse:
    context = await defaults_editor(service, session.owner)
    return _render_defaults(pages, request, session, context)


@router.post("/defaults")
async def save_defaults(
    request: Request,
    pages: PagesDep,
    session: PageSessionDep,
    service: SubscriptionServiceDep,
) -> Response:
    require(session, AccessLevel.WRITE)
    form = RetryForm.read(await request.form())
    body, errors = form.parsed(DeliveryDefaults)
    if body is None:
        context = await defaults_editor(service, session.owner, form=form, errors=errors)
        return _render_defaults(pages, request, session, context, 422)
    await service.set_defaults(session.owner, None, body)
    response = RedirectResponse(f"{PREFIX}/defaults", status_code=303)
    pages.flash(
        response, "Defaults saved. Endpoints that set none use them from their next attempt."
    )
    return response


def _render_endpoint(
    pages: Pages,
    request: Request,
    session: PageSession,
    subscription: Subscription,
    retries: dict[str, Any],
    status_code: int = 200,
) -> HTMLResponse:
    context = {
        "title": f"Retries and timeout: {subscription.endpoint_url}",
        "subscription": subscription,
        "retries": retries,
        "can_write": session.can(AccessLevel.WRITE),
    }
    return pages.render(request, "portal/retries.html", context, status_code=status_code)


def _render_defaults(
    pages: Pages,
    request: Request,
    session: PageSession,
    retries: dict[str, Any],
    status_code: int = 200,
) -> HTMLResponse:
    context = {
        "title": "Delivery defaults",
        "retries": retries,
        "can_write": session.can(AccessLevel.WRITE),
    }
    return pages.render(request, "portal/defaults.html", context, status_code=status_code)
