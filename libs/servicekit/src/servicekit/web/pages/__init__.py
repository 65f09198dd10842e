"""Server-rendered pages for every service: Jinja2 templates in a shared layout, htmx, Server-
Sent Events, vendored assets, strict CSP, CSRF and signed page sessions."""

from servicekit.web.pages.csrf import CSRF_FIELD, CSRF_HEADER, CsrfRefused
from servicekit.web.pages.page_session import PageSession, PageSettings, SessionState
from servicekit.web.pages.site import (
    Flash,
    LoginRequired,
    NavItem,
    OptionalPageSessionDep,
    Pages,
    PagesDep,
    PageSessionDep,
    page_router,
)
from servicekit.web.pages.sse import PageEvent, event_stream

__all__ = [
    "CSRF_FIELD",
    "CSRF_HEADER",
    "CsrfRefused",
    "Flash",
    "LoginRequired",
    "NavItem",
    "OptionalPageSessionDep",
    "PageEvent",
    "PageSession",
    "PageSessionDep",
    "PageSettings",
    "Pages",
    "PagesDep",
    "SessionState",
    "event_stream",
    "page_router",
]
