"""A small website on 127.0.0.1 for crawls: linked pages, robots.txt, slow pages."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from aiohttp import web


class LocalWebsite:
    def __init__(self, pages: int = 12, delay: float = 0.0, fail_every: int = 0) -> None:
        self.pages = pages
        self.delay = delay
        # Every `fail_every`-th page answers 500 (retried, then logged as failed).
        self.fail_every = fail_every
        self.hits: list[tuple[float, str]] = []
        self.robots = "User-agent: *\nDisallow: /private\n"
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _page(self, request: web.Request) -> web.Response:
        import asyncio

        self.hits.append((time.monotonic(), request.path_qs))
        if self.delay:
            await asyncio.sleep(self.delay)
        n = int(request.match_info.get("n", "0"))
        if self.fail_every and n and n % self.fail_every == 0:
            return web.Response(status=500, text="broken")
        links = "".join(
            f'<a href="/page/{m}">page {m}</a> ' for m in (n + 1, n + 2) if m < self.pages
        )
        products = "".join(
            f'<div class="product"><h2>Item {n}-{k}</h2><span class="price">{k}.99</span></div>'
            for k in range(2)
        )
        body = (
            f"<html><head><title>Page {n}</title>"
            f'<meta name="description" content="About page {n}"></head>'
            f'<body><h1>Page {n}</h1>{products}{links}<a href="/private/secret">x</a>'
            '<a href="https://elsewhere.example/">off-site</a></body></html>'
        )
        return web.Response(text=body, content_type="text/html")

    async def _robots(self, request: web.Request) -> web.Response:
        return web.Response(text=self.robots)

    async def _private(self, request: web.Request) -> web.Response:
        self.hits.append((time.monotonic(), request.path_qs))
        return web.Response(text="<html><title>secret</title></html>", content_type="text/html")

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/robots.txt", self._robots)
        app.router.add_get("/page/{n}", self._page)
        app.router.add_get("/private/{tail:.*}", self._private)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = int(self._runner.addresses[0][1])

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


@asynccontextmanager
async def serving(
    handler: Callable[[web.Request], Awaitable[web.Response]], path: str = "/"
) -> AsyncIterator[str]:
    """One handler at `path` on a free loopback port, for the page's URL while it lasts."""
    app = web.Application()
    app.router.add_get(path, handler)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}{path}"
    finally:
        await runner.cleanup()
