"""The delivery log's pages: an endpoint's live log and its bulk actions (recover the failed,
retry the ticked), and one delivery's page, its live view and its retry. The live streams
look again only when the worker announces a change, in a short transaction of their own."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from servicekit.auth.api_keys import AccessLevel
from servicekit.paging import DEFAULT_PAGE_SIZE
from servicekit.web.live import LiveHubDep
from servicekit.web.pages import PageEvent, PagesDep, PageSessionDep, event_stream, page_router
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession

from webhook_hub.deliveries.dependencies import DeliveryServiceDep
from webhook_hub.deliveries.search import parse_log_search
from webhook_hub.deliveries.service import DeliveryService
from webhook_hub.errors import DeliveryNotFound, SubscriptionNotFound
from webhook_hub.portal.forms import parse_delivery_ids, parse_local_time, parse_status_filter
from webhook_hub.portal.presenting import recovered_sentence, retried_sentence
from webhook_hub.portal.routes.common import PREFIX, FormText, back_with, require, time_window
from webhook_hub.settings import SettingsDep
from webhook_hub.subscriptions.dependencies import SubscriptionServiceDep
from webhook_hub.wire_format import message_id_for

router = page_router()


@router.post("/endpoints/{subscription_id}/recover")
async def recover_failed(
    pages: PagesDep,
    session: PageSessionDep,
    deliveries: DeliveryServiceDep,
    service: SubscriptionServiceDep,
    subscription_id: uuid.UUID,
    since: FormText = "",
) -> Response:
    require(session, AccessLevel.WRITE)
    moment = parse_local_time(since)
    if moment is None:
        # The API's 422 for a missing or malformed `since`, as a message on the page.
        await service.get(session.owner, subscription_id)
        return back_with(pages, subscription_id, "Pick the date and time to recover from.", "error")
    recovered = await deliveries.recover_all(session.owner, subscription_id, moment)
    return back_with(pages, subscription_id, recovered_sentence(recovered, moment))


@router.post("/endpoints/{subscription_id}/retry-selected")
async def retry_selected(
    request: Request,
    pages: PagesDep,
    session: PageSessionDep,
    deliveries: DeliveryServiceDep,
    subscription_id: uuid.UUID,
) -> Response:
    require(session, AccessLevel.WRITE)
    picked = parse_delivery_ids((await request.form()).getlist("delivery"))
    if not picked:
        await deliveries.owned_subscription(session.owner, subscription_id)
        return back_with(pages, subscription_id, "Tick the deliveries to retry first.", "error")
    queued = await deliveries.retry_many(session.owner, subscription_id, picked)
    return back_with(pages, subscription_id, retried_sentence(queued, len(picked)))


@router.get("/endpoints/{subscription_id}/deliveries/live")
async def live_deliveries(
    request: Request,
    pages: PagesDep,
    session: PageSessionDep,
    service: SubscriptionServiceDep,
    hub: LiveHubDep,
    subscription_id: uuid.UUID,
    status_text: Annotated[str, Query(alias="status", max_length=40)] = "",
    event_type: Annotated[str | None, Query(max_length=200)] = None,
    created_from: Annotated[str, Query(alias="from", max_length=40)] = "",
    created_to: Annotated[str, Query(alias="to", max_length=40)] = "",
    q: Annotated[str, Query(max_length=1000)] = "",
) -> Response:
    await service.get(session.owner, subscription_id)  # 404 before any stream opens
    window, _ = time_window(created_from, created_to)
    search = parse_log_search(q)
    status = parse_status_filter(status_text)
    factory: async_sessionmaker[AsyncSession] = request.app.state.session_factory
    owner = session.owner
    # Streams of the same endpoint and filters share each look (one query, one render).
    # Checkboxes only for sessions that may retry: the level is part of the view's key.
    selectable = session.can(AccessLevel.WRITE)
    view = (status, event_type or None, window, search, selectable)

    async def rows_html() -> str:
        # A short transaction per look, made only after a change was announced: an open
        # stream holds no connection and polls nothing.
        async with factory() as db, db.begin():
            page = await DeliveryService(db).page(
                owner,
                subscription_id,
                limit=DEFAULT_PAGE_SIZE,
                cursor=None,
                status=status,
                event_type=event_type or None,
                created_from=window[0],
                created_to=window[1],
                search=search,
            )
        return pages.templates.get_template("portal/delivery_rows.html").render(
            deliveries=page.items, selectable=selectable
        )

    stream = hub.open(session.session_id, owner, str(subscription_id))  # 429 past a cap

    async def events() -> AsyncIterator[PageEvent]:
        shown = ""
        async for _ in stream.changes(lambda: pages.session_holds(request)):
            html = await stream.read(view, rows_html)
            if html != shown:
                shown = html
                yield PageEvent(html, event="deliveries")

    return event_stream(events(), on_close=stream.close, on_shutdown=stream.end)


@router.get("/deliveries/{delivery_id}")
async def delivery_detail(
    request: Request,
    pages: PagesDep,
    settings: SettingsDep,
    session: PageSessionDep,
    deliveries: DeliveryServiceDep,
    service: SubscriptionServiceDep,
    delivery_id: uuid.UUID,
) -> HTMLResponse:
    delivery, attempts = await deliveries.get(session.owner, delivery_id)
    subscription = await service.get(session.owner, delivery.subscription_id)
    context = {
        "title": f"Delivery of {delivery.event_type}",
        "delivery": delivery,
        "attempts": attempts,
        "as_sent": await deliveries.as_sent(delivery, attempts, subscription, settings),
        "message_id": message_id_for(delivery.id),
        "subscription": subscription,
        "payload": json.dumps(delivery.payload, indent=2, ensure_ascii=False),
        "can_write": session.can(AccessLevel.WRITE),
    }
    return pages.render(request, "portal/delivery.html", context)


@router.get("/deliveries/{delivery_id}/live")
async def delivery_live(
    request: Request,
    pages: PagesDep,
    settings: SettingsDep,
    session: PageSessionDep,
    deliveries: DeliveryServiceDep,
    hub: LiveHubDep,
    delivery_id: uuid.UUID,
) -> Response:
    """The delivery's status and attempts, sent again whenever its endpoint's deliveries
    change (the worker announces each batch's subscriptions), so a retry shows up as
    it is made."""
    delivery, _ = await deliveries.get(session.owner, delivery_id)  # 404 before a stream
    factory: async_sessionmaker[AsyncSession] = request.app.state.session_factory
    owner = session.owner
    subscription_id = delivery.subscription_id

    async def parts_html() -> tuple[str, str]:
        # A short transaction per look, made only after a change was announced.
        async with factory() as db, db.begin():
            service = DeliveryService(db)
            current, attempts = await service.get(owner, delivery_id)
            subscription = await service.subscriptions.get_owned(subscription_id, owner)
            if subscription is None:
                raise SubscriptionNotFound()
            as_sent = await service.as_sent(current, attempts, subscription, settings)
        context = {
            "delivery": current,
            "attempts": attempts,
            "as_sent": as_sent,
            "message_id": message_id_for(current.id),
            "subscription": subscription,
        }
        templates = pages.templates
        return (
            templates.get_template("portal/_delivery_facts.html").render(context),
            templates.get_template("portal/_delivery_attempts.html").render(context),
        )

    stream = hub.open(session.session_id, owner, str(subscription_id))  # 429 past a cap

    async def events() -> AsyncIterator[PageEvent]:
        shown = ("", "")
        async for _ in stream.changes(lambda: pages.session_holds(request)):
            try:
                parts = await stream.read(("delivery", delivery_id), parts_html)
            except (DeliveryNotFound, SubscriptionNotFound):
                return  # deleted with its endpoint: nothing more to show
            if parts != shown:
                shown = parts
                yield PageEvent(parts[0], event="facts")
                yield PageEvent(parts[1], event="attempts")

    return event_stream(events(), on_close=stream.close, on_shutdown=stream.end)


@router.post("/deliveries/{delivery_id}/retry")
async def retry_delivery(
    pages: PagesDep,
    session: PageSessionDep,
    deliveries: DeliveryServiceDep,
    delivery_id: uuid.UUID,
) -> Response:
    require(session, AccessLevel.WRITE)
    await deliveries.retry(session.owner, delivery_id)
    response = RedirectResponse(f"{PREFIX}/deliveries/{delivery_id}", status_code=303)
    pages.flash(response, "Retry queued: the attempt appears below when it is made.")
    return response
