"""The scrapers' webhooks: the list with recent deliveries, registering one (its secret shown
once), removing one, and the way into webhook-hub's delivery portal."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Path, Request
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


@dataclass(frozen=True)
class WebhooksPage:
    """The webhooks' page for the request's user, drawn with what an action has to tell."""

    request: Request
    pages: Pages
    user: PageSession
    settings: Settings
    service: WebhookService

    async def render(
        self,
        *,
        form: dict[str, Any] | None = None,
        errors: dict[str, str] | None = None,
        created: Any = None,
        portal_error: str | None = None,
        status_code: int = 200,
    ) -> HTMLResponse:
        owner, shown = self.user.owner, self.settings.dashboard_deliveries
        return self.pages.render(
            self.request,
            "dashboard/webhooks.html",
            {
                "title": "Webhooks",
                "webhooks": await self.service.with_deliveries(owner, shown),
                "event_types": RUN_EVENT_TYPES,
                "form": form or {"url": "", "events": []},
                "errors": errors or {},
                "created": created,
                "portal_error": portal_error,
                "can_write": self.user.can(AccessLevel.WRITE),
                "can_delete": self.user.can(AccessLevel.ADMIN),
            },
            status_code=status_code,
        )


async def webhooks_page(
    request: Request,
    pages: PagesDep,
    user: PageSessionDep,
    settings: SettingsDep,
    service: WebhookServiceDep,
) -> WebhooksPage:
    return WebhooksPage(request, pages, user, settings, service)


WebhooksPageDep = Annotated[WebhooksPage, Depends(webhooks_page)]

router = page_router()


@router.get("/webhooks")
async def webhooks(page: WebhooksPageDep) -> HTMLResponse:
    return await page.render()


@router.post("/webhooks")
async def add_webhook(page: WebhooksPageDep) -> HTMLResponse:
    require(page.user, AccessLevel.WRITE)
    data = await page.request.form()
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
            created = await page.service.register(page.user.owner, None, body)
        except ServiceError as exc:
            errors["events" if isinstance(exc, UnknownRunEvents) else "url"] = exc.message
        else:
            # Rendered, not redirected: the secret is shown this once and never stored
            # in a cookie.
            return await page.render(created=created, status_code=201)
    return await page.render(form=form, errors=errors, status_code=422)


@router.post("/webhooks/portal")
async def open_portal(page: WebhooksPageDep) -> HTMLResponse:
    """A fresh one-time link into webhook-hub's portal for this user, asked on the click
    (a POST: it mints a credential). The browser is sent on by the answer page's meta
    refresh, not a 303: the page's CSP (`form-action 'self'`) stops a form's redirect to
    another origin in Chromium."""
    try:
        issued = await page.service.portal_link(page.user.owner, page.user.level)
    except (HubUnavailable, NoPortalYet) as exc:
        return await page.render(portal_error=exc.message, status_code=exc.status_code)
    return page.pages.render(
        page.request,
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
