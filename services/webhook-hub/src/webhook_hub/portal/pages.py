"""The portal's pages: thin handlers over the same services as the API (SubscriptionService,
DeliveryService, EventTypeService), authorised like it: the session's owner scopes every query
(another owner's id is the API's 404) and its level gates every change."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import FastAPI, Form, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import ValidationError
from servicekit.auth.api_keys import AccessLevel
from servicekit.auth.dependencies import Principal, principal_from_api_key
from servicekit.paging import DEFAULT_PAGE_SIZE
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
from servicekit.web.session import SessionDep
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession

from webhook_hub.deliveries.service import DeliveryService
from webhook_hub.dependencies import (
    DeliveryServiceDep,
    EventTypeServiceDep,
    PortalLinkServiceDep,
    ProberDep,
    SubscriptionServiceDep,
)
from webhook_hub.errors import (
    EndpointNotAllowed,
    NeedsLevel,
    PersonalDataNotApproved,
    UnknownEventTypes,
)
from webhook_hub.models import Delivery, DeliveryStatus, EventType
from webhook_hub.portal.forms import subscription_form_errors
from webhook_hub.portal.service import portal_level
from webhook_hub.settings import Settings
from webhook_hub.subscriptions.schemas import SubscriptionCreate, SubscriptionUpdate
from webhook_hub.subscriptions.service import WILDCARD

PREFIX = "/portal"
TEMPLATES = Path(__file__).parent / "templates"
LIVE_POLL_SECONDS = 1.0
FormText = Annotated[str, Form()]


def install_portal(app: FastAPI, settings: Settings) -> Pages:
    pages = Pages(
        app,
        settings,
        prefix=PREFIX,
        site_name="Webhooks portal",
        login_path=f"{PREFIX}/login",
        logout_path=f"{PREFIX}/logout",
        nav=[
            NavItem("Endpoints", f"{PREFIX}/endpoints"),
            NavItem("Event catalog", f"{PREFIX}/event-types"),
        ],
        template_dirs=[TEMPLATES],
    )
    router = pages.router()

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
        principal = await principal_from_api_key(db, api_key.strip()) if api_key else None
        if principal is None:
            context = {"title": "Sign in", "next": next, "error": "This API key is not valid."}
            return pages.render(request, "portal/login.html", context, status_code=401)
        response = RedirectResponse(pages.safe_next(next), status_code=303)
        pages.start_session(response, principal.owner, portal_level(principal.level))
        return response

    @router.post("/logout")
    async def logout(pages: PagesDep) -> Response:
        response = RedirectResponse(f"{PREFIX}/login", status_code=303)
        pages.end_session(response)
        pages.flash(response, "You are signed out.", "info")
        return response

    @router.get("/link/{token}")
    async def link_landing(
        request: Request, token: str, pages: PagesDep, links: PortalLinkServiceDep
    ) -> HTMLResponse:
        # Opening is a POST: link previews (chat unfurlers, mail scanners) GET the address
        # and must not spend the one use.
        link = await links.check(token)
        context = {"title": "Open the portal", "owner": link.owner, "level": link.level}
        return pages.render(request, "portal/link.html", context)

    @router.post("/link/{token}")
    async def link_open(token: str, pages: PagesDep, links: PortalLinkServiceDep) -> Response:
        owner, level = await links.use(token)
        response = RedirectResponse(f"{PREFIX}/endpoints", status_code=303)
        pages.start_session(response, owner, level)
        return response

    # -- endpoints (subscriptions) -------------------------------------------------------------

    @router.get("/endpoints")
    async def endpoints(
        request: Request,
        pages: PagesDep,
        session: PageSessionDep,
        service: SubscriptionServiceDep,
        cursor: Annotated[str | None, Query(max_length=500)] = None,
    ) -> HTMLResponse:
        page = await service.page(
            session.owner, limit=DEFAULT_PAGE_SIZE, cursor=cursor, is_active=None, event_type=None
        )
        context = {
            "title": "Endpoints",
            "subscriptions": page.items,
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
        preset = request.query_params.getlist("event")
        values = {"events": preset, "timeout_seconds": "10"}
        return _render_form(pages, request, catalog, values, {})

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
        form = await request.form()
        values: dict[str, Any] = {
            "endpoint_url": str(form.get("endpoint_url", "")).strip(),
            "events": [str(v) for v in form.getlist("events")],
            "description": str(form.get("description", "")).strip(),
            "timeout_seconds": str(form.get("timeout_seconds", "")).strip() or "10",
        }
        try:
            body = SubscriptionCreate(
                endpoint_url=values["endpoint_url"],
                events=values["events"],
                description=values["description"] or None,
                timeout_seconds=values["timeout_seconds"],
            )
            subscription, _ = await service.create(session.owner, None, body)
        except (
            ValidationError,
            UnknownEventTypes,
            EndpointNotAllowed,
            PersonalDataNotApproved,
        ) as exc:
            catalog = await types.visible_to(_principal(session))
            errors = subscription_form_errors(exc)
            return _render_form(pages, request, catalog, values, errors, status_code=422)
        # As the API: commit before the probe, so no transaction waits on a slow endpoint.
        await service.commit()
        probe = await prober.probe(subscription.endpoint_url)
        context = {
            "title": "Endpoint created",
            "subscription": subscription,
            "secret": subscription.secret,
            "probe": probe,
        }
        return pages.render(request, "portal/created.html", context, status_code=201)

    @router.get("/endpoints/{subscription_id}")
    async def endpoint_detail(
        request: Request,
        pages: PagesDep,
        session: PageSessionDep,
        service: SubscriptionServiceDep,
        deliveries: DeliveryServiceDep,
        subscription_id: uuid.UUID,
        status: DeliveryStatus | None = None,
        event_type: Annotated[str | None, Query(max_length=200)] = None,
        cursor: Annotated[str | None, Query(max_length=500)] = None,
    ) -> HTMLResponse:
        subscription = await service.get(session.owner, subscription_id)
        event_type = event_type or None
        page = await deliveries.page(
            session.owner,
            subscription_id,
            limit=DEFAULT_PAGE_SIZE,
            cursor=cursor,
            status=status,
            event_type=event_type,
        )
        live_query = _query(status=status.value if status else None, event_type=event_type)
        context = {
            "title": subscription.description or subscription.endpoint_url,
            "subscription": subscription,
            "deliveries": page.items,
            "next_cursor": page.next_cursor,
            "status": status.value if status else "",
            "event_type": event_type or "",
            "event_types": sorted({*subscription.events} - {WILDCARD}),
            # Only the first page follows new deliveries; later pages are history.
            "live_url": None
            if cursor
            else f"{PREFIX}/endpoints/{subscription.id}/deliveries/live{live_query}",
            "can_write": session.can(AccessLevel.WRITE),
            "can_delete": session.can(AccessLevel.ADMIN),
        }
        return pages.render(request, "portal/endpoint.html", context)

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
        subscription_id: uuid.UUID,
        status: DeliveryStatus | None = None,
        event_type: Annotated[str | None, Query(max_length=200)] = None,
    ) -> Response:
        await service.get(session.owner, subscription_id)  # 404 before any stream opens
        factory: async_sessionmaker[AsyncSession] = request.app.state.session_factory
        owner = session.owner

        async def rows_now() -> list[Delivery]:
            # A short transaction per look: a stream open for hours holds no connection.
            async with factory() as db, db.begin():
                page = await DeliveryService(db).page(
                    owner,
                    subscription_id,
                    limit=DEFAULT_PAGE_SIZE,
                    cursor=None,
                    status=status,
                    event_type=event_type or None,
                )
                return list(page.items)

        async def events() -> AsyncIterator[PageEvent]:
            shown = ""
            while True:
                html = pages.templates.get_template("portal/delivery_rows.html").render(
                    deliveries=await rows_now()
                )
                if html != shown:
                    shown = html
                    yield PageEvent(html, event="deliveries")
                await asyncio.sleep(LIVE_POLL_SECONDS)

        return event_stream(events())

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
            "subscription": subscription,
            "payload": json.dumps(delivery.payload, indent=2, ensure_ascii=False),
            "can_write": session.can(AccessLevel.WRITE),
        }
        return pages.render(request, "portal/delivery.html", context)

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
        request: Request, pages: PagesDep, session: PageSessionDep, types: EventTypeServiceDep
    ) -> HTMLResponse:
        catalog = [t for t in await types.visible_to(_principal(session)) if t.is_active]
        context = {
            "title": "Event catalog",
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

    app.include_router(router)
    return pages


def _principal(session: PageSession) -> Principal:
    return Principal(owner=session.owner, level=session.level)


def _require(session: PageSession, level: AccessLevel) -> None:
    if not session.can(level):
        raise NeedsLevel(f"This needs the '{level.value}' access level; you have '{session.level}'")


def _back_to(subscription_id: uuid.UUID) -> Response:
    return RedirectResponse(f"{PREFIX}/endpoints/{subscription_id}", status_code=303)


def _query(**params: str | None) -> str:
    kept = {k: v for k, v in params.items() if v}
    return f"?{urlencode(kept)}" if kept else ""


def _render_form(
    pages: Pages,
    request: Request,
    catalog: Any,
    values: dict[str, Any],
    errors: dict[str, str],
    *,
    status_code: int = 200,
) -> HTMLResponse:
    types: list[EventType] = [t for t in catalog if t.is_active]
    context = {
        "title": "New endpoint",
        "event_types": types,
        "values": values,
        "errors": errors,
    }
    return pages.render(request, "portal/new_endpoint.html", context, status_code=status_code)


__all__ = ["PREFIX", "install_portal"]
