"""An endpoint's page and its controls: the delivery log with its filters, charts and
snippets; rate limit, ordering, status, test and example sends, secret rotation, deletion.
Every control answers as the API's own change (the same checks), then back to the page."""

from __future__ import annotations

import uuid
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import ValidationError
from servicekit.auth.api_keys import AccessLevel
from servicekit.errors import UnprocessableEntity
from servicekit.paging import DEFAULT_PAGE_SIZE
from servicekit.web.pages import PagesDep, PageSessionDep, page_router

from webhook_hub.deliveries.dependencies import DeliveryServiceDep
from webhook_hub.deliveries.search import MAX_SEARCH_CHARS, PAYLOAD_SCAN_LIMIT, parse_log_search
from webhook_hub.errors import BurstWithoutRateLimit
from webhook_hub.event_types.dependencies import EventTypeServiceDep
from webhook_hub.portal.expression_editor import expression_counts
from webhook_hub.portal.forms import (
    OrderingForm,
    expression_error_text,
    local_time_value,
    parse_status_filter,
)
from webhook_hub.portal.paging import PageLink, page_links
from webhook_hub.portal.rate_limit import HELD_CAP, RateLimitForm, form_errors, rate_limit_view
from webhook_hub.portal.retries import endpoint_retries
from webhook_hub.portal.routes.common import (
    PREFIX,
    FormText,
    OwnSubscription,
    SettingsSaveDep,
    WritableSubscription,
    back_with,
    principal,
    require,
    snippets,
    time_window,
)
from webhook_hub.portal.stats import PortalStatsServiceDep
from webhook_hub.subscriptions.dependencies import SubscriptionServiceDep
from webhook_hub.subscriptions.schemas import SubscriptionUpdate
from webhook_hub.subscriptions.service import WILDCARD, example_choices

RATE_LIMIT_REFUSALS: tuple[type[ValidationError | BurstWithoutRateLimit], ...] = (
    ValidationError,
    BurstWithoutRateLimit,
)
ORDERING_REFUSALS: tuple[type[ValueError | UnprocessableEntity], ...] = (
    ValueError,
    UnprocessableEntity,
)

router = page_router()


@router.get("/endpoints/{subscription_id}")
async def endpoint_detail(
    request: Request,
    pages: PagesDep,
    session: PageSessionDep,
    service: SubscriptionServiceDep,
    deliveries: DeliveryServiceDep,
    stats: PortalStatsServiceDep,
    types: EventTypeServiceDep,
    subscription_id: uuid.UUID,
    subscription: OwnSubscription,
    status_text: Annotated[str, Query(alias="status", max_length=40)] = "",
    event_type: Annotated[str | None, Query(max_length=200)] = None,
    cursor: Annotated[str | None, Query(max_length=500)] = None,
    created_from: Annotated[str, Query(alias="from", max_length=40)] = "",
    created_to: Annotated[str, Query(alias="to", max_length=40)] = "",
    q: Annotated[str, Query(max_length=1000)] = "",
) -> HTMLResponse:
    event_type = event_type or None
    search = parse_log_search(q)
    window, filter_errors = time_window(created_from, created_to)
    # The form's "Any status" sends `status=`: an empty field is no filter (the API's
    # own parameter stays strict).
    status = parse_status_filter(status_text)
    if status_text.strip() and status is None:
        filter_errors["status"] = "Pick a status from the list."
    catalog = await types.visible_to(principal(session))
    page = await deliveries.page(
        session.owner,
        subscription_id,
        limit=DEFAULT_PAGE_SIZE,
        cursor=cursor,
        status=status,
        event_type=event_type,
        created_from=window[0],
        created_to=window[1],
        search=search,
    )
    live_query = _query(
        status=status.value if status else None,
        event_type=event_type,
        q=q.strip()[:MAX_SEARCH_CHARS] or None,
        **{"from": local_time_value(window[0]), "to": local_time_value(window[1])},
    )
    context = {
        "title": subscription.description or subscription.endpoint_url,
        "subscription": subscription,
        "deliveries": page.items,
        "pager": _pager(request, cursor, page.next_cursor),
        "status": status.value if status else "",
        "event_type": event_type or "",
        "q": q.strip()[:MAX_SEARCH_CHARS],
        "payload_search": search is not None and search.payload_text is not None,
        "scan_limit": PAYLOAD_SCAN_LIMIT,
        "event_types": sorted({*subscription.events} - {WILDCARD}),
        "created_from": local_time_value(window[0]) if window[0] else created_from,
        "created_to": local_time_value(window[1]) if window[1] else created_to,
        "filter_errors": filter_errors,
        "charts": await stats.charts(subscription.id),
        "day_total": (await stats.day_totals([subscription.id]))[subscription.id],
        "snippets": snippets(subscription.endpoint_url, subscription.id, None),
        # Only the first page follows new deliveries; later pages are history.
        "live_url": None
        if cursor
        else f"{PREFIX}/endpoints/{subscription.id}/deliveries/live{live_query}",
        "can_write": session.can(AccessLevel.WRITE),
        "example_types": [t.name for t in example_choices(subscription, catalog)]
        if session.can(AccessLevel.WRITE)
        else [],
        "selectable": session.can(AccessLevel.WRITE),
        "can_delete": session.can(AccessLevel.ADMIN),
        "retries": await endpoint_retries(service, session.owner, subscription),
        "expression_counts": await expression_counts(service, subscription.id),
        "rate_limit": rate_limit_view(
            subscription, await deliveries.held_by_rate_limit(subscription, HELD_CAP)
        ),
        "ordering_now": OrderingForm.of(subscription.ordering),
        "ordering_form": OrderingForm.of(subscription.ordering),
        "held_keys": await deliveries.held_keys(session.owner, subscription_id),
    }
    return pages.render(request, "portal/endpoint.html", context)


@router.post("/endpoints/{subscription_id}/rate-limit")
async def set_rate_limit(
    request: Request,
    pages: PagesDep,
    deliveries: DeliveryServiceDep,
    subscription: WritableSubscription,
    save: SettingsSaveDep,
) -> Response:
    form = RateLimitForm.read(await request.form())
    answer = await save(form.patch, RATE_LIMIT_REFUSALS, "Rate limit saved.")
    if isinstance(answer, Response):  # saved
        return answer
    held = await deliveries.held_by_rate_limit(subscription, HELD_CAP)
    context = {
        "title": "Rate limit",
        "subscription": subscription,
        "can_write": True,
        "rate_limit": rate_limit_view(subscription, held, form, form_errors(answer)),
    }
    return pages.render(request, "portal/rate_limit.html", context, status_code=422)


@router.post("/endpoints/{subscription_id}/ordering")
async def save_ordering(
    request: Request,
    pages: PagesDep,
    session: PageSessionDep,
    deliveries: DeliveryServiceDep,
    subscription_id: uuid.UUID,
    subscription: WritableSubscription,
    save: SettingsSaveDep,
) -> Response:
    form = OrderingForm.read(await request.form())
    answer = await save(form.body, ORDERING_REFUSALS, "Ordering saved.")
    if isinstance(answer, Response):  # saved
        return answer
    # The editor again, the expression as typed and what is wrong with it at its input.
    context = {
        "title": "Ordered delivery",
        "subscription": subscription,
        "ordering_now": OrderingForm.of(subscription.ordering),
        "ordering_form": form,
        "ordering_error": expression_error_text(answer),
        "standalone": True,
        "held_keys": await deliveries.held_keys(session.owner, subscription_id),
        "can_write": True,
    }
    return pages.render(request, "portal/subscription_ordering_page.html", context, status_code=422)


@router.post("/endpoints/{subscription_id}/status")
async def set_status(
    pages: PagesDep,
    session: PageSessionDep,
    service: SubscriptionServiceDep,
    subscription_id: uuid.UUID,
    active: FormText,
) -> Response:
    require(session, AccessLevel.WRITE)
    enable = active == "true"
    await service.update(session.owner, subscription_id, SubscriptionUpdate(is_active=enable))
    return back_with(
        pages, subscription_id, "Endpoint re-enabled." if enable else "Endpoint disabled."
    )


@router.post("/endpoints/{subscription_id}/test")
async def send_test(
    pages: PagesDep,
    service: SubscriptionServiceDep,
    subscription_id: uuid.UUID,
    subscription: WritableSubscription,
) -> Response:
    await service.queue_test(subscription)
    return back_with(
        pages, subscription_id, "A webhook.test event is on its way: watch the log below."
    )


@router.post("/endpoints/{subscription_id}/example")
async def send_example(
    pages: PagesDep,
    session: PageSessionDep,
    service: SubscriptionServiceDep,
    types: EventTypeServiceDep,
    subscription_id: uuid.UUID,
    subscription: WritableSubscription,
    event_type: FormText = "",
) -> Response:
    offered = example_choices(subscription, await types.visible_to(principal(session)))
    chosen = next((t for t in offered if t.name == event_type), None)
    if chosen is None:
        # Only a stale page or a hand-made post names a type the list does not offer.
        return back_with(
            pages, subscription_id, "Pick an event type this endpoint receives.", "error"
        )
    await service.queue_example(subscription, chosen)
    return back_with(
        pages,
        subscription_id,
        f"An example {chosen.name} event is on its way: watch the log below.",
    )


@router.post("/endpoints/{subscription_id}/rotate-secret")
async def rotate_secret(
    request: Request,
    pages: PagesDep,
    session: PageSessionDep,
    service: SubscriptionServiceDep,
    subscription_id: uuid.UUID,
) -> HTMLResponse:
    require(session, AccessLevel.WRITE)
    rotation = await service.rotate_secret(session.owner, subscription_id)
    subscription = await service.get(session.owner, subscription_id)
    context = {
        "title": "New signing secret",
        "subscription": subscription,
        "secret": rotation.secret,
        "valid_until": rotation.valid_until,
        "snippets": snippets(subscription.endpoint_url, subscription.id, rotation.secret),
    }
    return pages.render(request, "portal/rotated.html", context)


@router.post("/endpoints/{subscription_id}/delete")
async def delete_endpoint(
    pages: PagesDep,
    session: PageSessionDep,
    service: SubscriptionServiceDep,
    subscription_id: uuid.UUID,
) -> Response:
    require(session, AccessLevel.ADMIN)  # as `DELETE /webhooks/subscriptions/{id}`
    await service.delete(session.owner, subscription_id)
    response = RedirectResponse(f"{PREFIX}/endpoints", status_code=303)
    pages.flash(response, "Endpoint deleted, with its delivery log.")
    return response


def _query(**params: str | None) -> str:
    kept = {k: v for k, v in params.items() if v}
    return f"?{urlencode(kept)}" if kept else ""


def _pager(request: Request, cursor: str | None, next_cursor: str | None) -> dict[str, Any]:
    """The log's Previous / Next / First page addresses (None: no such link)."""
    links = page_links(cursor, request.query_params.getlist("back"), next_cursor)
    kept = [(k, v) for k, v in request.query_params.multi_items() if k not in {"cursor", "back"}]

    def href(link: PageLink | None) -> str | None:
        if link is None:
            return None
        cursor_param = [("cursor", link.cursor)] if link.cursor else []
        query = urlencode([*kept, *cursor_param, *[("back", entry) for entry in link.back]])
        return f"{request.url.path}?{query}" if query else request.url.path

    first = None if links.on_first else href(PageLink(None, []))
    return {"previous": href(links.previous), "next": href(links.next), "first": first}
