"""The portal's pages: thin handlers over the same services as the API (SubscriptionService,
DeliveryService, EventTypeService), authorised like it: the session's owner scopes every query
(another owner's id is the API's 404) and its level gates every change."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, TypeVar
from urllib.parse import urlencode

from fastapi import FastAPI, Form, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import ValidationError
from servicekit.auth.api_keys import AccessLevel
from servicekit.auth.dependencies import Principal
from servicekit.errors import UnprocessableEntity
from servicekit.paging import DEFAULT_PAGE_SIZE
from servicekit.web.live import LiveHubDep
from servicekit.web.pages import (
    NavItem,
    OptionalPageSessionDep,
    PageEvent,
    Pages,
    PagesDep,
    PageSession,
    PageSessionDep,
    event_stream,
)
from servicekit.web.pages.links import landing_page, signed_in
from servicekit.web.session import SessionDep
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession

from webhook_hub.deliveries.dependencies import DeliveryServiceDep
from webhook_hub.deliveries.search import MAX_SEARCH_CHARS, PAYLOAD_SCAN_LIMIT, parse_log_search
from webhook_hub.deliveries.service import DeliveryService
from webhook_hub.delivery_engine.endpoint_policy import EndpointRefused
from webhook_hub.delivery_engine.jobs import message_id_for
from webhook_hub.errors import (
    BurstWithoutRateLimit,
    DeliveryNotFound,
    EndpointNotAllowed,
    NeedsLevel,
    PersonalDataNotApproved,
    SubscriptionNotFound,
    UnknownEventTypes,
)
from webhook_hub.event_types.dependencies import EventTypeServiceDep
from webhook_hub.event_types.service import matching
from webhook_hub.models import EventType, PortalSession
from webhook_hub.portal.dependencies import PortalLinkServiceDep
from webhook_hub.portal.expression_editor import expression_counts, install_expression_editor
from webhook_hub.portal.forms import (
    EndpointForm,
    OrderingForm,
    expression_error_text,
    local_time_value,
    parse_delivery_ids,
    parse_local_time,
    parse_status_filter,
    subscription_form_errors,
)
from webhook_hub.portal.paging import PageLink, page_links
from webhook_hub.portal.presenting import (
    delivery_state,
    describe_error,
    health_summary,
    probe_verdict,
    recovered_sentence,
    retried_sentence,
)
from webhook_hub.portal.rate_limit import (
    HELD_CAP,
    RateLimitForm,
    form_errors,
    rate_limit_view,
)
from webhook_hub.portal.retries import endpoint_retries, install_retry_pages
from webhook_hub.portal.service import portal_level
from webhook_hub.portal.snippets import receiver_snippets
from webhook_hub.portal.stats import PortalStatsServiceDep
from webhook_hub.settings import Settings
from webhook_hub.subscriptions.dependencies import ProberDep, SubscriptionServiceDep
from webhook_hub.subscriptions.schemas import SubscriptionCreate, SubscriptionUpdate
from webhook_hub.subscriptions.service import WILDCARD, SubscriptionService, example_choices

PREFIX = "/portal"
TEMPLATES = Path(__file__).parent / "templates"
FormText = Annotated[str, Form()]
LocalTime = Annotated[str, Query(max_length=40)]
# What the endpoint form may refuse, each shown at its field.
FORM_REFUSALS = (
    ValidationError,
    EndpointRefused,
    UnknownEventTypes,
    EndpointNotAllowed,
    PersonalDataNotApproved,
)
RATE_LIMIT_REFUSALS: tuple[type[ValidationError | BurstWithoutRateLimit], ...] = (
    ValidationError,
    BurstWithoutRateLimit,
)


def install_portal(app: FastAPI, settings: Settings) -> Pages:
    pages = Pages(
        app,
        settings,
        prefix=PREFIX,
        site_name="Webhooks portal",
        login_path=f"{PREFIX}/login",
        sessions=PortalSession,
        session_level=portal_level,
        logout_path=f"{PREFIX}/logout",
        nav=[
            NavItem("Endpoints", f"{PREFIX}/endpoints"),
            NavItem("Event catalog", f"{PREFIX}/event-types"),
            NavItem("Delivery defaults", f"{PREFIX}/defaults"),
        ],
        template_dirs=[TEMPLATES],
    )
    router = pages.router()
    pages.templates.globals.update(
        describe_error=describe_error, delivery_state=delivery_state, health_summary=health_summary
    )

    # -- access ------------------------------------------------------------------------------

    @router.get("/")
    async def home(session: PageSessionDep) -> Response:
        return RedirectResponse(f"{PREFIX}/endpoints", status_code=303)

    @router.get("/login")
    async def login_form(
        request: Request, pages: PagesDep, session: OptionalPageSessionDep, next: str = ""
    ) -> HTMLResponse:
        return pages.render(
            request, "portal/login.html", {"title": "Sign in", "next": next, "error": None}
        )

    @router.post("/login")
    async def login(
        request: Request,
        pages: PagesDep,
        db: SessionDep,
        api_key: FormText = "",
        next: FormText = "",
    ) -> Response:
        principal = await pages.key_sign_in(request, db, api_key)
        if principal is None:
            context = {"title": "Sign in", "next": next, "error": "This API key is not valid."}
            return pages.render(request, "portal/login.html", context, status_code=401)
        response = RedirectResponse(pages.safe_next(next), status_code=303)
        level = portal_level(principal.level)
        await pages.start_session(db, response, principal.owner, level, api_key_id=principal.key_id)
        return response

    @router.post("/logout")
    async def logout(request: Request, pages: PagesDep, db: SessionDep) -> Response:
        response = RedirectResponse(f"{PREFIX}/login", status_code=303)
        await pages.end_session(request, db, response)
        pages.flash(response, "You are signed out.", "info")
        return response

    @router.get("/link/{token}")
    async def link_landing(
        request: Request, token: str, pages: PagesDep, links: PortalLinkServiceDep
    ) -> HTMLResponse:
        link = await links.check(token)
        return landing_page(pages, request, link, destination="the webhooks portal")

    @router.post("/link/{token}")
    async def link_open(
        token: str, pages: PagesDep, db: SessionDep, links: PortalLinkServiceDep
    ) -> Response:
        return await signed_in(pages, db, await links.redeem(token), f"{PREFIX}/endpoints")

    # -- endpoints (subscriptions) -------------------------------------------------------------

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
        _require(session, AccessLevel.WRITE)
        catalog = await types.visible_to(_principal(session))
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
        _require(session, AccessLevel.WRITE)
        form = EndpointForm.read(await request.form())
        try:
            body = SubscriptionCreate.model_validate(form.body())
            subscription, _ = await service.create(session.owner, None, body)
        except FORM_REFUSALS as exc:
            catalog = await types.visible_to(_principal(session))
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
            "snippets": _snippets(subscription.endpoint_url, subscription.id, subscription.secret),
        }
        return pages.render(request, "portal/created.html", context, status_code=201)

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
        status_text: Annotated[str, Query(alias="status", max_length=40)] = "",
        event_type: Annotated[str | None, Query(max_length=200)] = None,
        cursor: Annotated[str | None, Query(max_length=500)] = None,
        created_from: Annotated[str, Query(alias="from", max_length=40)] = "",
        created_to: Annotated[str, Query(alias="to", max_length=40)] = "",
        q: Annotated[str, Query(max_length=1000)] = "",
    ) -> HTMLResponse:
        subscription = await service.get(session.owner, subscription_id)
        event_type = event_type or None
        search = parse_log_search(q)
        window, filter_errors = _time_window(created_from, created_to)
        # The form's "Any status" sends `status=`: an empty field is no filter (the API's
        # own parameter stays strict).
        status = parse_status_filter(status_text)
        if status_text.strip() and status is None:
            filter_errors["status"] = "Pick a status from the list."
        catalog = await types.visible_to(_principal(session))
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
            "snippets": _snippets(subscription.endpoint_url, subscription.id, None),
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

    @router.get("/endpoints/{subscription_id}/edit")
    async def edit_endpoint_form(
        request: Request,
        pages: PagesDep,
        session: PageSessionDep,
        service: SubscriptionServiceDep,
        types: EventTypeServiceDep,
        subscription_id: uuid.UUID,
    ) -> HTMLResponse:
        _require(session, AccessLevel.WRITE)
        subscription = await service.get(session.owner, subscription_id)
        form = EndpointForm(
            endpoint_url=subscription.endpoint_url,
            events=list(subscription.events),
            description=subscription.description or "",
            headers=list(subscription.headers.items()),
            send_trace_context=subscription.send_trace_context,
        )
        catalog = await types.visible_to(_principal(session))
        return _render_form(pages, request, catalog, form, {}, editing=subscription.id)

    @router.post("/endpoints/{subscription_id}/edit")
    async def edit_endpoint(
        request: Request,
        pages: PagesDep,
        session: PageSessionDep,
        service: SubscriptionServiceDep,
        types: EventTypeServiceDep,
        subscription_id: uuid.UUID,
    ) -> Response:
        _require(session, AccessLevel.WRITE)
        await service.get(session.owner, subscription_id)  # another owner's id: 404 first
        form = EndpointForm.read(await request.form())
        try:
            # Every field is sent, as a PATCH naming them all: the same checks as the API's.
            patch = SubscriptionUpdate.model_validate(form.body())
            await service.update(session.owner, subscription_id, patch)
        except FORM_REFUSALS as exc:
            catalog = await types.visible_to(_principal(session))
            errors = subscription_form_errors(exc)
            return _render_form(
                pages, request, catalog, form, errors, editing=subscription_id, status_code=422
            )
        response = _back_to(subscription_id)
        pages.flash(response, "Endpoint saved.")
        return response

    @router.post("/endpoints/{subscription_id}/rate-limit")
    async def set_rate_limit(
        request: Request,
        pages: PagesDep,
        session: PageSessionDep,
        service: SubscriptionServiceDep,
        deliveries: DeliveryServiceDep,
        subscription_id: uuid.UUID,
    ) -> Response:
        _require(session, AccessLevel.WRITE)
        subscription = await service.get(session.owner, subscription_id)
        form = RateLimitForm.read(await request.form())

        async def refused(exc: ValidationError | BurstWithoutRateLimit) -> Response:
            held = await deliveries.held_by_rate_limit(subscription, HELD_CAP)
            context = {
                "title": "Rate limit",
                "subscription": subscription,
                "can_write": True,
                "rate_limit": rate_limit_view(subscription, held, form, form_errors(exc)),
            }
            return pages.render(request, "portal/rate_limit.html", context, status_code=422)

        return await _saved_or_refused(
            pages,
            service,
            session,
            subscription_id,
            form.patch,
            RATE_LIMIT_REFUSALS,
            refused,
            "Rate limit saved.",
        )

    # -- ordered delivery (issue 32, item 3) -----------------------------------------------

    @router.post("/endpoints/{subscription_id}/ordering")
    async def save_ordering(
        request: Request,
        pages: PagesDep,
        session: PageSessionDep,
        service: SubscriptionServiceDep,
        deliveries: DeliveryServiceDep,
        subscription_id: uuid.UUID,
    ) -> Response:
        _require(session, AccessLevel.WRITE)
        subscription = await service.get(session.owner, subscription_id)
        form = OrderingForm.read(await request.form())

        async def refused(exc: Exception) -> Response:
            # The editor again, the expression as typed and what is wrong with it at its input.
            context = {
                "title": "Ordered delivery",
                "subscription": subscription,
                "ordering_now": OrderingForm.of(subscription.ordering),
                "ordering_form": form,
                "ordering_error": expression_error_text(exc),
                "standalone": True,
                "held_keys": await deliveries.held_keys(session.owner, subscription_id),
                "can_write": True,
            }
            return pages.render(
                request, "portal/subscription_ordering_page.html", context, status_code=422
            )

        return await _saved_or_refused(
            pages,
            service,
            session,
            subscription_id,
            form.body,
            (ValueError, UnprocessableEntity),
            refused,
            "Ordering saved.",
        )

    @router.post("/endpoints/{subscription_id}/recover")
    async def recover_failed(
        pages: PagesDep,
        session: PageSessionDep,
        deliveries: DeliveryServiceDep,
        service: SubscriptionServiceDep,
        subscription_id: uuid.UUID,
        since: FormText = "",
    ) -> Response:
        _require(session, AccessLevel.WRITE)
        moment = parse_local_time(since)
        if moment is None:
            # The API's 422 for a missing or malformed `since`, as a message on the page.
            await service.get(session.owner, subscription_id)
            response = _back_to(subscription_id)
            pages.flash(response, "Pick the date and time to recover from.", "error")
            return response
        recovered = await deliveries.recover_all(session.owner, subscription_id, moment)
        response = _back_to(subscription_id)
        pages.flash(response, recovered_sentence(recovered, moment))
        return response

    @router.post("/endpoints/{subscription_id}/retry-selected")
    async def retry_selected(
        request: Request,
        pages: PagesDep,
        session: PageSessionDep,
        deliveries: DeliveryServiceDep,
        subscription_id: uuid.UUID,
    ) -> Response:
        _require(session, AccessLevel.WRITE)
        picked = parse_delivery_ids((await request.form()).getlist("delivery"))
        response = _back_to(subscription_id)
        if not picked:
            await deliveries.owned_subscription(session.owner, subscription_id)
            pages.flash(response, "Tick the deliveries to retry first.", "error")
            return response
        queued = await deliveries.retry_many(session.owner, subscription_id, picked)
        pages.flash(response, retried_sentence(queued, len(picked)))
        return response

    @router.post("/endpoints/{subscription_id}/status")
    async def set_status(
        pages: PagesDep,
        session: PageSessionDep,
        service: SubscriptionServiceDep,
        subscription_id: uuid.UUID,
        active: FormText,
    ) -> Response:
        _require(session, AccessLevel.WRITE)
        enable = active == "true"
        await service.update(session.owner, subscription_id, SubscriptionUpdate(is_active=enable))
        response = _back_to(subscription_id)
        pages.flash(response, "Endpoint re-enabled." if enable else "Endpoint disabled.")
        return response

    @router.post("/endpoints/{subscription_id}/test")
    async def send_test(
        pages: PagesDep,
        session: PageSessionDep,
        service: SubscriptionServiceDep,
        subscription_id: uuid.UUID,
    ) -> Response:
        _require(session, AccessLevel.WRITE)
        subscription = await service.get(session.owner, subscription_id)
        await service.queue_test(subscription)
        response = _back_to(subscription_id)
        pages.flash(response, "A webhook.test event is on its way: watch the log below.")
        return response

    @router.post("/endpoints/{subscription_id}/example")
    async def send_example(
        pages: PagesDep,
        session: PageSessionDep,
        service: SubscriptionServiceDep,
        types: EventTypeServiceDep,
        subscription_id: uuid.UUID,
        event_type: FormText = "",
    ) -> Response:
        _require(session, AccessLevel.WRITE)  # as `POST .../{id}/test`
        subscription = await service.get(session.owner, subscription_id)
        offered = example_choices(subscription, await types.visible_to(_principal(session)))
        chosen = next((t for t in offered if t.name == event_type), None)
        response = _back_to(subscription_id)
        if chosen is None:
            # Only a stale page or a hand-made post names a type the list does not offer.
            pages.flash(response, "Pick an event type this endpoint receives.", "error")
            return response
        await service.queue_example(subscription, chosen)
        pages.flash(response, f"An example {chosen.name} event is on its way: watch the log below.")
        return response

    @router.post("/endpoints/{subscription_id}/rotate-secret")
    async def rotate_secret(
        request: Request,
        pages: PagesDep,
        session: PageSessionDep,
        service: SubscriptionServiceDep,
        subscription_id: uuid.UUID,
    ) -> HTMLResponse:
        _require(session, AccessLevel.WRITE)
        rotation = await service.rotate_secret(session.owner, subscription_id)
        subscription = await service.get(session.owner, subscription_id)
        context = {
            "title": "New signing secret",
            "subscription": subscription,
            "secret": rotation.secret,
            "valid_until": rotation.valid_until,
            "snippets": _snippets(subscription.endpoint_url, subscription.id, rotation.secret),
        }
        return pages.render(request, "portal/rotated.html", context)

    @router.post("/endpoints/{subscription_id}/delete")
    async def delete_endpoint(
        pages: PagesDep,
        session: PageSessionDep,
        service: SubscriptionServiceDep,
        subscription_id: uuid.UUID,
    ) -> Response:
        _require(session, AccessLevel.ADMIN)  # as `DELETE /webhooks/subscriptions/{id}`
        await service.delete(session.owner, subscription_id)
        response = RedirectResponse(f"{PREFIX}/endpoints", status_code=303)
        pages.flash(response, "Endpoint deleted, with its delivery log.")
        return response

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
        window, _ = _time_window(created_from, created_to)
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

    # -- deliveries ------------------------------------------------------------------------------

    @router.get("/deliveries/{delivery_id}")
    async def delivery_detail(
        request: Request,
        pages: PagesDep,
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
        _require(session, AccessLevel.WRITE)
        await deliveries.retry(session.owner, delivery_id)
        response = RedirectResponse(f"{PREFIX}/deliveries/{delivery_id}", status_code=303)
        pages.flash(response, "Retry queued: the attempt appears below when it is made.")
        return response

    # -- event catalog --------------------------------------------------------------------------

    @router.get("/event-types")
    async def event_types(
        request: Request,
        pages: PagesDep,
        session: PageSessionDep,
        types: EventTypeServiceDep,
        q: Annotated[str, Query(max_length=200)] = "",
    ) -> HTMLResponse:
        active = [t for t in await types.visible_to(_principal(session)) if t.is_active]
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

    install_retry_pages(router, PREFIX)
    install_expression_editor(router, pages)
    app.include_router(router)
    return pages


def _principal(session: PageSession) -> Principal:
    return Principal(owner=session.owner, level=session.level)


def _require(session: PageSession, level: AccessLevel) -> None:
    if not session.can(level):
        raise NeedsLevel(f"This needs the '{level.value}' access level; you have '{session.level}'")


def _back_to(subscription_id: uuid.UUID) -> Response:
    return RedirectResponse(f"{PREFIX}/endpoints/{subscription_id}", status_code=303)


Refusal = TypeVar("Refusal", bound=Exception)


async def _saved_or_refused(
    pages: Pages,
    service: SubscriptionService,
    session: PageSession,
    subscription_id: uuid.UUID,
    body: Callable[[], Any],
    refusals: tuple[type[Refusal], ...],
    refused: Callable[[Refusal], Awaitable[Response]],
    saved: str,
) -> Response:
    """A settings form's save, as a PATCH of the fields it names (the API's checks): back to
    the endpoint with `saved` flashed, or `refused`'s page (the form again, with its errors)."""
    try:
        patch = SubscriptionUpdate.model_validate(body())
        await service.update(session.owner, subscription_id, patch)
    except refusals as exc:
        return await refused(exc)
    response = _back_to(subscription_id)
    pages.flash(response, saved)
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


def _time_window(
    created_from: str, created_to: str
) -> tuple[tuple[datetime | None, datetime | None], dict[str, str]]:
    """The log's time filter from its two datetime-local inputs (UTC); a value that is not a
    date and time is left out of the filter and told at its input."""
    window: list[datetime | None] = []
    errors: dict[str, str] = {}
    for name, text in (("from", created_from), ("to", created_to)):
        moment = parse_local_time(text) if text else None
        if text and moment is None:
            errors[name] = "Use a date and time such as 2026-11-22T10:00."
        window.append(moment)
    if window[0] and window[1] and window[1] <= window[0]:
        errors["to"] = "Pick a moment after the start of the range."
    return (window[0], window[1]), errors


def _snippets(endpoint_url: str, subscription_id: uuid.UUID, secret: str | None) -> Any:
    return receiver_snippets(endpoint_url, str(subscription_id), secret)


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


__all__ = ["PREFIX", "install_portal"]
