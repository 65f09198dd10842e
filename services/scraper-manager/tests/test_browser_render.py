"""Pages rendered by headless Chromium (`render: "browser"`): a page built by its scripts is
extracted, and every request the browser makes goes through the egress proxy, which applies
the crawler's address policy. 127.0.0.1 stands for the public internet (the policy allows
exactly it); 127.0.0.2 is an internal service on the same port, so only the address decides
which one a connection reaches."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import httpx
import pytest
from aiohttp import web
from aiohttp.abc import AbstractResolver
from scraper_manager.crawler.browser import BrowserPool, PageRenderer
from scraper_manager.crawler.egress import EgressProxy
from scraper_manager.crawler.engine import Collected, Crawl, CrawlConfig, CrawlStats
from scraper_manager.settings import Settings
from servicekit.net import AddressPolicy, guarded_connector
from servicekit.testing.resolver import ScriptedResolver
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.dashboard import DASH, new_scraper_form, signed_in_as_new
from tests.factories import make_client
from tests.test_crawl_safety import Site, public_site
from tests.test_crawls import BASE, start_crawl, wait_for_status

__all__ = ["public_site"]  # 127.0.0.1, the public internet, as test_crawl_safety serves it

CHROMIUM = "/usr/bin/chromium"
PUBLIC_ONLY = AddressPolicy.allowing(["127.0.0.1/32"])

INTERNAL_SECRET = "<html><title>internal secret</title><p class='x'>secret</p></html>"


@pytest.fixture(scope="session")
async def pool() -> AsyncIterator[BrowserPool]:
    pool = BrowserPool(CHROMIUM, pages=4)
    yield pool
    await pool.close()


@pytest.fixture
async def internal_site(public_site: Site) -> AsyncIterator[Site]:
    site = Site("127.0.0.2", pages={"/admin": INTERNAL_SECRET, "/data": '{"secret": 1}'})
    await site.start(port=public_site.port)
    yield site
    await site.stop()


@dataclass
class Rendered:
    items: list[dict[str, Any]]
    stats: CrawlStats
    refused: dict[str, str]
    renderer: PageRenderer
    log: list[str] = field(default_factory=list)


async def render_crawl(
    pool: BrowserPool,
    url: str,
    *,
    resolver: AbstractResolver | None = None,
    timeout: float = 10,
    upstream: str | None = None,
    **config: Any,
) -> Rendered:
    """The crawl engine with browser rendering, as the worker builds it, on `PUBLIC_ONLY`;
    the page's own requests through the proxy `upstream` if given (a scraper's pool)."""
    items: list[dict[str, Any]] = []

    async def sink(batch: list[Collected]) -> None:
        items.extend(entry[1] for entry in batch if isinstance(entry, tuple))

    egress = EgressProxy(
        PUBLIC_ONLY,
        resolver=resolver,
        dns_cache=False,
        upstream=None if upstream is None else (lambda: upstream),
    )
    renderer = PageRenderer(pool, egress, user_agent="t", timeout_seconds=timeout)
    await renderer.open()
    connector = guarded_connector(
        PUBLIC_ONLY, resolver=resolver, use_dns_cache=False, force_close=True
    )
    try:
        async with aiohttp.ClientSession(connector=connector) as http:
            crawl = Crawl(
                CrawlConfig(url=url, obey_robots=False, max_retries=0, **config),
                http,
                user_agent="t",
                on_items=sink,
                stop=asyncio.Event(),
                render=renderer.render,
            )
            stats = await crawl.run()
    finally:
        await renderer.close()
    return Rendered(items, stats, dict(egress.refused), renderer)


def page(script: str = "", body: str = "") -> str:
    return (
        f"<html><head><title>home</title></head><body>{body}<script>{script}</script></body></html>"
    )


async def test_items_rendered_by_a_script_are_extracted(
    pool: BrowserPool, public_site: Site
) -> None:
    public_site.pages["/"] = page(
        "for (const n of ['Lamp', 'Desk']) {"
        " const d = document.createElement('div'); d.className = 'product';"
        " d.innerHTML = '<h2>' + n + '</h2>'; document.body.appendChild(d); }"
    )
    done = await render_crawl(
        pool, f"{public_site.url}/", item_selector="div.product", selectors={"name": "h2::text"}
    )
    assert [item["name"] for item in done.items] == ["Lamp", "Desk"]


async def test_items_fetched_by_the_page_with_xhr_are_extracted(
    pool: BrowserPool, public_site: Site
) -> None:
    public_site.pages["/"] = page(
        "fetch('/items.html').then(r => r.text()).then(t => {"
        " document.body.insertAdjacentHTML('beforeend', t); });"
    )
    public_site.pages["/items.html"] = "<div class='product'><h2>Chair</h2></div>"
    done = await render_crawl(
        pool, f"{public_site.url}/", item_selector="div.product", selectors={"name": "h2::text"}
    )
    assert [item["name"] for item in done.items] == ["Chair"]
    assert "/items.html" in public_site.hits


# Each route by which a page may reach an address, and each kind of address refused.
REFUSED_HOSTS = {
    "loopback": "127.0.0.2",
    "loopback-v6": "[::1]",
    "private": "10.0.0.1",
    "link-local": "169.254.1.1",
    "metadata": "169.254.169.254",
}


@pytest.mark.parametrize("kind", sorted(REFUSED_HOSTS))
async def test_a_script_src_to_a_refused_address_is_not_fetched(
    pool: BrowserPool, public_site: Site, internal_site: Site, kind: str
) -> None:
    target = f"http://{REFUSED_HOSTS[kind]}:{public_site.port}/admin"
    public_site.pages["/"] = page(body=f'<script src="{target}"></script>')
    done = await render_crawl(pool, f"{public_site.url}/")
    assert internal_site.hits == []
    assert target in done.refused
    assert [item["title"] for item in done.items] == ["home"]


@pytest.mark.parametrize("kind", sorted(REFUSED_HOSTS))
async def test_xhr_and_fetch_to_a_refused_address_are_not_made(
    pool: BrowserPool, public_site: Site, internal_site: Site, kind: str
) -> None:
    target = f"http://{REFUSED_HOSTS[kind]}:{public_site.port}/data"
    public_site.pages["/"] = page(
        f"fetch('{target}').catch(() => {{}});"
        f"const x = new XMLHttpRequest(); x.open('GET', '{target}?xhr'); x.send();"
    )
    done = await render_crawl(pool, f"{public_site.url}/")
    assert internal_site.hits == []
    assert target in done.refused
    assert f"{target}?xhr" in done.refused


@pytest.mark.parametrize("kind", sorted(REFUSED_HOSTS))
async def test_an_iframe_of_a_refused_address_is_not_loaded(
    pool: BrowserPool, public_site: Site, internal_site: Site, kind: str
) -> None:
    target = f"http://{REFUSED_HOSTS[kind]}:{public_site.port}/admin"
    public_site.pages["/"] = page(body=f'<iframe src="{target}"></iframe>')
    done = await render_crawl(pool, f"{public_site.url}/")
    assert internal_site.hits == []
    assert target in done.refused


@pytest.mark.parametrize("kind", sorted(REFUSED_HOSTS))
async def test_a_redirect_of_a_page_request_to_a_refused_address_is_not_followed(
    pool: BrowserPool, public_site: Site, internal_site: Site, kind: str
) -> None:
    """The script's request is allowed; the redirect it gets is a new request, refused."""
    target = f"http://{REFUSED_HOSTS[kind]}:{public_site.port}/admin"
    public_site.pages["/"] = page(body=f'<script src="/redirect?to={target}"></script>')
    done = await render_crawl(pool, f"{public_site.url}/")
    assert [hit.startswith("/redirect?to=") for hit in public_site.hits] == [False, True]
    assert internal_site.hits == []
    assert target in done.refused


@pytest.mark.parametrize("kind", sorted(REFUSED_HOSTS))
async def test_a_navigation_by_the_page_to_a_refused_address_is_refused(
    pool: BrowserPool, public_site: Site, internal_site: Site, kind: str
) -> None:
    """The page sends itself elsewhere (`location = ...`): the navigation is refused, and the
    page fails as a refusal, not with the internal page's content."""
    target = f"http://{REFUSED_HOSTS[kind]}:{public_site.port}/admin"
    public_site.pages["/"] = page(f"location.href = '{target}';")
    done = await render_crawl(pool, f"{public_site.url}/")
    assert internal_site.hits == []
    assert target in done.refused
    assert done.items == []
    assert "navigated to" in (done.stats.last_error or "")


@pytest.mark.parametrize("kind", sorted(REFUSED_HOSTS))
async def test_a_tunnel_to_a_refused_address_is_not_opened(
    pool: BrowserPool, public_site: Site, internal_site: Site, kind: str
) -> None:
    """https and wss go through CONNECT: refused before any connection is made."""
    host = REFUSED_HOSTS[kind]
    public_site.pages["/"] = page(
        f"fetch('https://{host}:{public_site.port}/data').catch(() => {{}});"
    )
    done = await render_crawl(pool, f"{public_site.url}/")
    assert internal_site.hits == []
    assert f"https://{host}:{public_site.port}/" in done.refused


async def test_the_browser_connects_to_the_checked_address_whatever_dns_answers_next(
    pool: BrowserPool, public_site: Site, internal_site: Site
) -> None:
    """A name that answers the public address when first checked and the internal one
    afterwards: each request is resolved once (one lookup each, none again at connect) and
    connected to what was checked, so the changed answer is refused, never connected to."""
    resolver = ScriptedResolver(["127.0.0.1", "127.0.0.2"])
    name = f"http://rebind.test:{public_site.port}"
    public_site.pages["/"] = page(body=f'<script src="{name}/app.js"></script>')
    internal_site.pages["/app.js"] = "document.title = 'internal'"
    done = await render_crawl(pool, f"{name}/", resolver=resolver)
    assert resolver.lookups == ["rebind.test", "rebind.test"]
    assert public_site.hits == ["/"]
    assert internal_site.hits == []
    assert f"{name}/app.js" in done.refused
    assert [item["title"] for item in done.items] == ["home"]


async def test_images_media_and_fonts_are_not_fetched_by_default(
    pool: BrowserPool, public_site: Site
) -> None:
    public_site.pages["/"] = page(
        body=(
            '<img src="/photo.png"><video src="/clip.mp4" autoplay></video>'
            "<style>@font-face { font-family: f; src: url(/font.woff2); }"
            " body { font-family: f; }</style><p>text</p>"
        )
    )
    done = await render_crawl(pool, f"{public_site.url}/")
    assert public_site.hits == ["/"]
    assert done.renderer.blocked_requests >= 2
    assert [item["title"] for item in done.items] == ["home"]


async def test_a_page_that_never_finishes_loading_ends_at_the_time_limit(
    pool: BrowserPool, public_site: Site
) -> None:
    never = asyncio.Event()

    async def hang(request: web.Request) -> web.Response:
        await never.wait()
        return web.Response(text="")

    public_site.pages["/"] = page(body='<script src="/slow/app.js"></script>')
    app = web.Application()
    app.router.add_get("/slow/{tail:.*}", hang)
    slow = Site("127.0.0.1")
    await slow.start(app)
    public_site.pages["/"] = page(body=f'<script src="{slow.url}/slow/app.js"></script>')
    try:
        done = await render_crawl(pool, f"{public_site.url}/", timeout=1)
    finally:
        never.set()
        await slow.stop()
    assert done.items == []
    assert done.stats.requests_failed == 1
    assert "did not load within 1 s" in (done.stats.last_error or "")


async def test_a_scraper_renders_over_http_unless_it_asks_for_a_browser(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "write")
    plain = await client.post(
        BASE, json={"name": "p", "url": "https://shop.example/"}, headers=who.headers
    )
    assert plain.json()["render"] == "http"
    patched = await client.patch(
        f"{BASE}/{plain.json()['id']}", json={"render": "browser"}, headers=who.headers
    )
    assert patched.status_code == 200, patched.text
    assert patched.json()["render"] == "browser"


async def test_a_render_other_than_http_or_browser_is_refused(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who = await make_client(db_engine, "write")
    answer = await client.post(
        BASE,
        json={"name": "p", "url": "https://shop.example/", "render": "webkit"},
        headers=who.headers,
    )
    assert answer.status_code == 422
    assert "render" in answer.text


async def test_a_browser_run_extracts_a_script_built_page_and_logs_what_the_browser_did(
    worker: Settings, client: httpx.AsyncClient, db_engine: AsyncEngine, public_site: Site
) -> None:
    public_site.pages["/"] = page(
        "const d = document.createElement('div'); d.className = 'product';"
        " d.innerHTML = '<h2>Lamp</h2>'; document.body.appendChild(d);",
        body='<img src="/photo.png">',
    )
    who = await make_client(db_engine, "write")
    scraper_id, run_id = await start_crawl(
        client,
        who,
        url=f"{public_site.url}/",
        render="browser",
        obey_robots=False,
        item_selector="div.product",
        selectors={"name": "h2::text"},
    )
    run = await wait_for_status(client, who, scraper_id, run_id, {"completed", "failed"}, 60)
    assert run["status"] == "completed", run
    results = (await client.get(f"{BASE}/{scraper_id}/results", headers=who.headers)).json()
    assert [r["data"]["name"] for r in results["data"]] == ["Lamp"]
    assert public_site.hits == ["/"]
    log = await client.get(f"{BASE}/{scraper_id}/runs/{run_id}/log", headers=who.headers)
    [browser] = [line for line in log.json()["data"] if line["message"] == "browser pages"]
    assert browser["fields"]["pages_rendered"] == 1
    assert browser["fields"]["blocked_requests"] == 1


async def test_the_dashboard_form_chooses_the_browser_and_the_scraper_page_shows_it(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    who, token = await signed_in_as_new(client, db_engine, "write")
    form = (await client.get(f"{DASH}/scrapers/new")).text
    offered = form.split('id="f-render"')[1].split("</select>")[0]
    assert re.findall(r'<option value="([^"]*)"', offered) == ["http", "browser"]
    assert '<option value="http" selected>' in offered
    answer = await new_scraper_form(
        client, token, {"name": "spa", "url": "http://127.0.0.1:9/", "render": "browser"}
    )
    assert answer.status_code == 303, answer.text
    created = (await client.get(BASE, headers=who.headers)).json()["data"][0]
    assert created["render"] == "browser"
    shown = (await client.get(answer.headers["location"])).text
    assert re.search(r'id="config-render">browser', shown)
    edit = (await client.get(f"{DASH}/scrapers/{created['id']}/edit")).text
    assert '<option value="browser" selected>' in edit


async def test_the_dashboard_form_shows_an_unknown_render_at_its_field(
    client: httpx.AsyncClient, db_engine: AsyncEngine
) -> None:
    _, token = await signed_in_as_new(client, db_engine, "write")
    answer = await new_scraper_form(
        client, token, {"name": "spa", "url": "http://127.0.0.1:9/", "render": "x"}
    )
    assert answer.status_code == 422
    assert 'id="f-render-error"' in answer.text
