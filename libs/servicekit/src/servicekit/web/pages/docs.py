"""Swagger UI at `/docs`, ReDoc at `/redoc` and GraphiQL pages, from the vendored assets, so
they work with no internet. FastAPI's and strawberry's own pages load theirs from a CDN and
start them with an inline script, which the pages' CSP forbids: here the start-up code is a
static file reading its settings from `data-` attributes."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse
from jinja2 import Environment

from servicekit.web.pages.security import DOCS_CSP


def _render(request: Request, template: str, **context: str) -> HTMLResponse:
    env: Environment = request.app.state.page_templates
    html = env.get_template(template).render(**context)
    return HTMLResponse(html, headers={"Content-Security-Policy": DOCS_CSP})


def install_api_docs(app: FastAPI, *, redoc: bool) -> None:
    """`/docs` (and `/redoc` when asked) for the app's OpenAPI document."""
    openapi_url = app.openapi_url or "/openapi.json"

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        return _render(
            request, "kit/swagger.html", title=f"{app.title} API", openapi_url=openapi_url
        )

    if redoc:

        @app.get("/redoc", include_in_schema=False)
        async def redoc_page(request: Request) -> HTMLResponse:
            return _render(
                request, "kit/redoc.html", title=f"{app.title} API", openapi_url=openapi_url
            )


def graphiql_response(
    request: Request,
    endpoint: str,
    title: str = "GraphiQL",
    *,
    subscriptions: bool = False,
    default_query: str = "",
) -> HTMLResponse:
    """GraphiQL for the GraphQL endpoint at `endpoint` (same origin), with the Explorer
    plugin; with `subscriptions`, it runs subscriptions over a WebSocket at the same path
    (graphql-transport-ws, the graphql-ws client bundled in GraphiQL's build), sending the
    headers editor's contents as `connection_init`'s payload. `default_query` fills the
    editor when the browser has kept none; `#token=...` in the address fills the headers
    editor's Authorization (graphiql-init.js)."""
    return _render(
        request,
        "kit/graphiql.html",
        title=title,
        endpoint=endpoint,
        subscriptions="ws" if subscriptions else "",
        default_query=default_query,
    )
