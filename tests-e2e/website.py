"""A small shop website on 127.0.0.1 for the scrapers: an index linking to item pages."""

from __future__ import annotations

from aiohttp import web

PAGES = 12


def _page(title: str, body: str) -> web.Response:
    html = f"<html><head><title>{title}</title></head><body>{body}</body></html>"
    return web.Response(text=html, content_type="text/html")


async def index(_: web.Request) -> web.Response:
    links = "".join(f'<a href="/items/{n}">Item {n}</a>' for n in range(1, PAGES + 1))
    return _page("Shop", f"<h1>Shop</h1>{links}")


async def item(request: web.Request) -> web.Response:
    n = int(request.match_info["n"])
    return _page(f"Item {n}", f'<h1 class="name">Item {n}</h1><span class="price">{n}.99</span>')


async def robots(_: web.Request) -> web.Response:
    return web.Response(text="User-agent: *\nAllow: /\n")


def website() -> web.Application:
    app = web.Application()
    app.router.add_get("/", index)
    app.router.add_get("/items/{n}", item)
    app.router.add_get("/robots.txt", robots)
    return app
