"""The portal's pages: thin handlers over the same services as the API (SubscriptionService,
DeliveryService, EventTypeService), authorised like it: the session's owner scopes every query
(another owner's id is the API's 404) and its level gates every change.

`install_portal` sets the site up (its `Pages`, reached by the handlers as `PagesDep`) and
includes the page groups, each a module-level router of `portal/routes/`; sign-in, sign-out
and link landing are servicekit's."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from servicekit.web.pages import NavItem, Pages
from servicekit.web.pages.sign_in import SignInPages, sign_in_router

from webhook_hub.models import PortalSession
from webhook_hub.portal.dependencies import get_portal_link_service
from webhook_hub.portal.presenting import delivery_state, describe_error, health_summary
from webhook_hub.portal.routes import (
    deliveries,
    endpoint,
    endpoint_list,
    event_types,
    expressions,
    retries,
)
from webhook_hub.portal.routes.common import PREFIX
from webhook_hub.portal.service import portal_level
from webhook_hub.settings import Settings

TEMPLATES = Path(__file__).parent / "templates"
SIGN_IN = SignInPages(
    template="portal/login.html",
    refused="This API key is not valid.",
    destination="the webhooks portal",
    landing=f"{PREFIX}/endpoints",
    signed_out="You are signed out.",
)
# In this order: `/endpoints/new` is matched before `/endpoints/{subscription_id}`.
ROUTERS = (
    endpoint_list.router,
    endpoint.router,
    deliveries.router,
    event_types.router,
    retries.router,
    expressions.router,
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
    pages.templates.globals.update(
        describe_error=describe_error, delivery_state=delivery_state, health_summary=health_summary
    )
    app.include_router(sign_in_router(SIGN_IN, get_portal_link_service), prefix=PREFIX)
    for router in ROUTERS:
        app.include_router(router, prefix=PREFIX)
    return pages


__all__ = ["PREFIX", "install_portal"]
