"""Egress chaining: a browser scraper with a proxy pool has everything its pages ask for leave
through the pool's proxy, after the address policy (refused addresses never reach the proxy),
and the proxy is handed the checked address. The proxy here is a real forward proxy on
loopback (plain http in absolute form, and CONNECT tunnels) that records what it carried."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import pytest
from scraper_manager.app import create_app
from scraper_manager.crawler.browser import BrowserPool
from scraper_manager.crawler.egress import EgressProxy, read_head
from scraper_manager.settings import Settings
from servicekit.testing import serve_app
from servicekit.testing.resolver import ScriptedResolver
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.factories import make_client
from tests.test_browser_render import PUBLIC_ONLY, page, pool, render_crawl
from tests.test_crawl_safety import Site, internal_site, public_site, run_worker_with
from tests.test_crawls import BASE, start_crawl, wait_for_status

__all__ = ["internal_site", "pool", "public_site"]  # fixtures used here


class ForwardProxy:
    """A forward proxy on 127.0.0.1: `GET http://host:port/path` is sent on to the host (one
    request per connection), `CONNECT host:port` becomes a tunnel. `carried` is what it was
    asked, as (method, target), in order."""

    def __init__(self) -> None:
        self.carried: list[tuple[str, str]] = []
        self.port = 0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            await self._serve(reader, writer)
        except (ConnectionError, OSError, asyncio.IncompleteReadError):
            pass  # a side hung up: this connection is over
        finally:
            self._tasks.discard(task)
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await read_head(reader)
        if head is None:
            return
        lines = head.decode("latin-1").split("\r\n")
        method, target, _ = lines[0].split(" ")
        self.carried.append((method, target))
        if method == "CONNECT":
            host, _, port = target.rpartition(":")
            far_reader, far_writer = await asyncio.open_connection(host.strip("[]"), int(port))
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            await writer.drain()
            await asyncio.gather(pipe(reader, far_writer), pipe(far_reader, writer))
            return
        parts = urlsplit(target)
        assert parts.hostname is not None
        headers = [
            line
            for line in lines[1:]
            if line and line.split(":", 1)[0].lower() not in {"connection", "proxy-connection"}
        ]
        length = next(
            (int(h.split(":", 1)[1]) for h in headers if h.lower().startswith("content-length:")),
            0,
        )
        body = await reader.readexactly(length) if length else b""
        far_reader, far_writer = await asyncio.open_connection(parts.hostname, parts.port or 80)
        path = parts.path or "/"
        if parts.query:
            path += "?" + parts.query
        request = [f"{method} {path} HTTP/1.1", *headers, "Connection: close", "", ""]
        far_writer.write("\r\n".join(request).encode("latin-1") + body)
        await far_writer.drain()
        await pipe(far_reader, writer)


async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await reader.read(65536):
            writer.write(chunk)
            await writer.drain()
    except (ConnectionError, OSError):
        pass  # the other side hung up: nothing left to carry
    finally:
        writer.close()


@pytest.fixture
async def upstream() -> AsyncIterator[ForwardProxy]:
    proxy = ForwardProxy()
    await proxy.start()
    yield proxy
    await proxy.stop()


async def test_a_browser_pages_requests_go_out_through_the_pools_proxy(
    pool: BrowserPool, public_site: Site, internal_site: Site, upstream: ForwardProxy
) -> None:
    public_site.pages["/"] = page(
        "fetch('/items.html').then(r => r.text()).then(t => {"
        " document.body.insertAdjacentHTML('beforeend', t); });",
        body='<script src="/app.js"></script>'
        f'<script src="http://127.0.0.2:{public_site.port}/admin"></script>',
    )
    public_site.pages["/app.js"] = "document.title = 'scripted';"
    public_site.pages["/items.html"] = "<div class='product'><h2>Chair</h2></div>"
    done = await render_crawl(
        pool,
        f"{public_site.url}/",
        upstream=upstream.url,
        item_selector="div.product",
        selectors={"name": "h2::text"},
    )
    # What the page fetched came back through the proxy ...
    assert [item["name"] for item in done.items] == ["Chair"]
    assert sorted(upstream.carried) == [
        ("GET", f"{public_site.url}/app.js"),
        ("GET", f"{public_site.url}/items.html"),
    ]
    assert sorted(public_site.hits) == ["/", "/app.js", "/items.html"]
    # ... and the refused address was refused before the proxy: it never saw it.
    assert f"http://127.0.0.2:{public_site.port}/admin" in done.refused
    assert internal_site.hits == []


async def test_a_tunnel_goes_through_the_pools_proxy_to_the_checked_address(
    public_site: Site, upstream: ForwardProxy
) -> None:
    """The proxy is handed the address the egress checked, never the name to resolve."""
    public_site.pages["/page"] = "tunnelled"
    resolver = ScriptedResolver(["127.0.0.1"])
    egress = EgressProxy(PUBLIC_ONLY, resolver=resolver, upstream=lambda: upstream.url)
    await egress.start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", egress.port)
        writer.write(f"CONNECT shop.test:{public_site.port} HTTP/1.1\r\n\r\n".encode())
        await writer.drain()
        assert (await read_head(reader) or b"").startswith(b"HTTP/1.1 200")
        writer.write(b"GET /page HTTP/1.1\r\nHost: shop.test\r\nConnection: close\r\n\r\n")
        await writer.drain()
        answer = await reader.read()
        writer.close()
    finally:
        await egress.close()
    assert answer.endswith(b"tunnelled")
    assert resolver.lookups == ["shop.test"]
    assert upstream.carried == [("CONNECT", f"127.0.0.1:{public_site.port}")]
    assert public_site.hits == ["/page"]


async def test_a_refused_tunnel_never_reaches_the_pools_proxy(
    public_site: Site, internal_site: Site, upstream: ForwardProxy
) -> None:
    egress = EgressProxy(PUBLIC_ONLY, upstream=lambda: upstream.url)
    await egress.start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", egress.port)
        writer.write(f"CONNECT 127.0.0.2:{public_site.port} HTTP/1.1\r\n\r\n".encode())
        await writer.drain()
        head = await read_head(reader) or b""
        writer.close()
    finally:
        await egress.close()
    assert head.startswith(b"HTTP/1.1 403")
    assert upstream.carried == []
    assert internal_site.hits == []


async def test_a_browser_scraper_with_a_proxy_pool_sends_its_pages_requests_through_it(
    service_settings: Settings,
    db_engine: AsyncEngine,
    public_site: Site,
    upstream: ForwardProxy,
) -> None:
    """Through the worker: the run's proxy rotation is the egress proxy's upstream, so the
    document (fetched by the engine) and the page's own requests all go through the pool."""
    public_site.pages["/"] = page(
        "fetch('/items.html').then(r => r.text()).then(t => {"
        " document.body.insertAdjacentHTML('beforeend', t); });"
    )
    public_site.pages["/items.html"] = "<div class='product'><h2>Lamp</h2></div>"
    pooled = service_settings.model_copy(update={"proxy_pools": {"office": [upstream.url]}})
    task, stop = await run_worker_with(pooled, allowed_networks=["127.0.0.1/32"])
    try:
        async with serve_app(create_app(pooled)) as api:
            who = await make_client(db_engine, "write")
            scraper_id, run_id = await start_crawl(
                api,
                who,
                url=f"{public_site.url}/",
                render="browser",
                proxy_pool="office",
                obey_robots=False,
                item_selector="div.product",
                selectors={"name": "h2::text"},
            )
            run = await wait_for_status(api, who, scraper_id, run_id, {"completed", "failed"}, 60)
            results = (await api.get(f"{BASE}/{scraper_id}/results", headers=who.headers)).json()
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
    assert run["status"] == "completed", run
    assert [r["data"]["name"] for r in results["data"]] == ["Lamp"]
    assert upstream.carried == [
        ("GET", f"{public_site.url}/"),
        ("GET", f"{public_site.url}/items.html"),
    ]
