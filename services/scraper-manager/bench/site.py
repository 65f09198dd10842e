"""A generated website of N linked pages on 127.0.0.1, for the crawl benchmark.

Every page links to the next three and to a few pages further on, so the whole site is
reachable from page 0 and links repeat (de-duplication matters)."""

from __future__ import annotations

import sys

from aiohttp import web

PAGES = 2000


def page(n: int, pages: int) -> str:
    targets = sorted({(n + k) % pages for k in (1, 2, 3, 17, 101)} - {n})
    links = "".join(f'<li><a href="/p/{t}">Page {t}</a></li>' for t in targets)
    return (
        "<!doctype html><html><head>"
        f'<title>Page {n}</title><meta name="description" content="Description of page {n}">'
        f"</head><body><h1>Page {n}</h1><p>{'Lorem ipsum dolor sit amet. ' * 30}</p>"
        f"<ul>{links}</ul></body></html>"
    )


def main() -> None:
    port, pages = int(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else PAGES
    bodies = {n: page(n, pages).encode() for n in range(pages)}

    async def handle(request: web.Request) -> web.Response:
        n = int(request.match_info["n"])
        if n not in bodies:
            return web.Response(status=404)
        return web.Response(body=bodies[n], content_type="text/html", charset="utf-8")

    app = web.Application()
    app.router.add_get("/p/{n}", handle)
    web.run_app(app, host="127.0.0.1", port=port, access_log=None, print=None)


if __name__ == "__main__":
    main()
