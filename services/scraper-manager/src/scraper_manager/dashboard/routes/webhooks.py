"""The scrapers' webhooks: the list with recent deliveries, registering one (its secret shown
once), removing one, and the way into webhook-hub's delivery portal."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Path, Request
from fastapi.responses import HTMLResponse, Response
from pydantic import ValidationError
from servicekit.auth import AccessLevel
from servicekit.contracts.webhook_hub import HubUnavailable
from servicekit.errors import ServiceError
from servicekit.web.pages import Pages, PagesDep, PageSession, PageSessionDep, page_router

from scraper_manager.dashboard.routes.common import PREFIX, redirected, require
from scraper_manager.errors import NoPortalYet, UnknownRunEvents
from scraper_manager.events import RUN_EVENT_TYPES
from scraper_manager.settings import Settings, SettingsDep
from scraper_manager.webhooks.dependencies import WebhookServiceDep
from scraper_manager.webhooks.schemas import WebhookCreate
from scraper_manager.webhooks.service import WebhookService

router = page_router()


async def webhooks_page(
    pages: Pages,
    request: Request,
    user: PageSession,
    settings: Settings,
    service: WebhookService,
    *,
    form: dict[str, Any] | None = None,
    errors: dict[str, str] | None = None,
    created: Any = None,
    portal_error: str | None = None,
    status_code: int = 200,
) -> HTMLResponse:
    return pages.render(
        request,
        "dashboard/webhooks.html",
        {
            "title": "Webhooks",
            "webhooks": await service.with_deliveries(user.owner, settings.dashboard_deliveries),
            "event_types": RUN_EVENT_TYPES,
            "form": form or {"url": "", "events": []},
            "errors": errors or {},
            "created": created,
            "portal_error": portal_error,
            "can_write": user.can(AccessLevel.WRITE),
            "can_delete": user.can(AccessLevel.ADMIN),
        },
        status_code=status_code,
    )


@router.get("/webhooks")
async def webhooks(
    request: Request,
    pages: PagesDep,
    user: PageSessionDep,
    settings: SettingsDep,
    service: WebhookServiceDep,
) -> HTMLResponse:
    return await webhooks_page(pages, request, user, settings, service)


@router.post("/webhooks")
async def add_webhook(
    request: Request,
    pages: PagesDep,
    user: PageSessionDep,
    settings: SettingsDep,
    service: WebhookServiceDep,
) -> HTMLResponse:
    require(user, AccessLevel.WRITE)
    data = await request.form()
    form = {
        "url": str(data.get("url", "") or "").strip(),
        "events": [str(e) for e in data.getlist("events")],
    }
    errors: dict[str, str] = {}
    try:
        body = WebhookCreate.model_validate(form)
    except ValidationError as exc:
        for error in exc.errors():
            where = str(error["loc"][0]) if error["loc"] else "url"
            errors.setdefault(where, str(error["msg"]).removeprefix("Value error, "))
    else:
        try:
            created = await service.register(user.owner, None, body)
        except ServiceError as exc:
            errors["events" if isinstance(exc, UnknownRunEvents) else "url"] = exc.message
        else:
            # Rendered, not redirected: the secret is shown this once and never stored
            # in a cookie.
            return await webhooks_page(
                pages, request, user, settings, service, created=created, status_code=201
            )
    return await webhooks_page(
        pages, request, user, settings, service, form=form, errors=errors, status_code=422
    )


@router.post("/webhooks/portal")
async def open_portal(
    request: Request,
    pages: PagesDep,
    user: PageSessionDep,
    settings: SettingsDep,
    service: WebhookServiceDep,
) -> HTMLResponse:
    """A fresh one-time link into webhook-hub's portal for this user, asked on the click
    (a POST: it mints a credential). The browser is sent on by the answer page's meta
    refresh, not a 303: the page's CSP (`form-action 'self'`) stops a form's redirect to
    another origin in Chromium."""
    try:
        issued = await service.portal_link(user.owner, user.level)
    except (HubUnavailable, NoPortalYet) as exc:
        return await webhooks_page(
            pages,
            request,
            user,
            settings,
            service,
            portal_error=exc.message,
            status_code=exc.status_code,
        )
    return pages.render(
        request,
        "dashboard/portal_open.html",
        {"title": "Opening the delivery portal", "url": issued.url},
    )


@router.post("/webhooks/{webhook_id}/delete")
async def remove_webhook(
    pages: PagesDep,
    webhook_id: Annotated[str, Path(max_length=64)],
    user: PageSessionDep,
    service: WebhookServiceDep,
) -> Response:
    require(user, AccessLevel.ADMIN)
    await service.delete(user.owner, webhook_id)
    return redirected(pages, f"{PREFIX}/webhooks", "Webhook removed.")
