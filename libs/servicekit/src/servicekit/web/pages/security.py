"""Headers every HTML response carries: a strict Content-Security-Policy (scripts and styles
only from the service itself, never inline; no other origin at all), unless the response set
its own (the API docs, whose UIs inject styles at run time), and no sniffing, framing or
cross-site referrers."""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from servicekit.web.middleware import Headers, editing_response_headers

PAGE_CSP = "; ".join(
    (
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "font-src 'self'",
        "connect-src 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
        "base-uri 'none'",
    )
)
# Swagger UI, ReDoc and GraphiQL write <style> elements from their scripts (ReDoc's
# styled-components, GraphiQL's editors) and ReDoc searches in a worker made from a blob:
# inline *styles* and blob: workers are allowed there, inline *scripts* still are not.
DOCS_CSP = "; ".join(
    (
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data:",
        "font-src 'self' data:",
        "connect-src 'self'",
        "worker-src 'self' blob:",
        "form-action 'self'",
        "frame-ancestors 'none'",
        "base-uri 'none'",
    )
)
_HTML_HEADERS = (
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
    (b"cross-origin-opener-policy", b"same-origin"),
)


class HtmlSecurityHeadersMiddleware:
    """Pure ASGI: adds the headers above to every `text/html` response of the app."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        await self.app(scope, receive, editing_response_headers(send, _add_html_headers))


def _add_html_headers(headers: Headers) -> None:
    if not dict(headers).get(b"content-type", b"").startswith(b"text/html"):
        return
    names = {name.lower() for name, _ in headers}
    if b"content-security-policy" not in names:
        headers.append((b"content-security-policy", PAGE_CSP.encode()))
    headers.extend(h for h in _HTML_HEADERS if h[0] not in names)
