"""A shop on 127.0.0.1 whose products the test changes between runs, answering validators as
real servers do: each page has an `ETag` (a digest of its body) and a `Last-Modified`, and a
request whose `If-None-Match` matches (or, without it, whose `If-Modified-Since` is not
older) is answered 304 without a body."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from email.utils import format_datetime, parsedate_to_datetime

from aiohttp import web


@dataclass
class Catalog:
    # page number -> {sku: price}
    pages: dict[int, dict[str, str]] = field(default_factory=dict)
    validators: bool = True
    etags: bool = True
    last_modified: str = "Sun, 22 Nov 2026 10:00:00 GMT"
    # What each request asked: (path, If-None-Match, If-Modified-Since, status answered).
    requests: list[tuple[str, str | None, str | None, int]] = field(default_factory=list)
    bytes_sent: int = 0
    port: int = 0
    _runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/shop/0"

    def body(self, n: int) -> str:
        products = "".join(
            f'<div class="product"><span class="sku">{sku}</span>'
            f'<span class="price">{price}</span></div>'
            for sku, price in self.pages.get(n, {}).items()
        )
        following = f'<a href="/shop/{n + 1}">next</a>' if n + 1 in self.pages else ""
        return (
            f"<html><head><title>Shop {n}</title></head><body>{products}{following}</body></html>"
        )

    async def _page(self, request: web.Request) -> web.Response:
        n = int(request.match_info["n"])
        if n not in self.pages:
            raise web.HTTPNotFound()
        body = self.body(n)
        etag = '"' + hashlib.sha256(body.encode()).hexdigest()[:16] + '"'
        asked_etag = request.headers.get("If-None-Match")
        asked_since = request.headers.get("If-Modified-Since")
        headers = {"Last-Modified": self.last_modified} if self.validators else {}
        if self.validators and self.etags:
            headers["ETag"] = etag
        unchanged = False
        if self.validators and self.etags and asked_etag is not None:
            unchanged = asked_etag == etag
        elif self.validators and asked_since is not None:
            unchanged = parsedate_to_datetime(asked_since) >= parsedate_to_datetime(
                self.last_modified
            )
        status = 304 if unchanged else 200
        self.requests.append((request.path, asked_etag, asked_since, status))
        if unchanged:
            return web.Response(status=304, headers=headers)
        self.bytes_sent += len(body)
        return web.Response(text=body, content_type="text/html", headers=headers)

    async def _robots(self, request: web.Request) -> web.Response:
        return web.Response(text="User-agent: *\nAllow: /\n")

    def touch(self, when: str = "Mon, 23 Nov 2026 10:00:00 GMT") -> None:
        self.last_modified = format_datetime(parsedate_to_datetime(when), usegmt=True)

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/robots.txt", self._robots)
        app.router.add_get("/shop/{n}", self._page)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = int(self._runner.addresses[0][1])

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
