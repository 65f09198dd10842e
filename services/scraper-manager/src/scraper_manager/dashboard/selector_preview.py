"""The selector editor's start page, and what selectors extract from it (issue 35: the
dashboard's answer to Crawlab's and Portia's "try your selectors on the page").

The start page is fetched by the crawler itself, a one-page `Crawl` of the scraper's URL with
its headers, robots.txt rule, rate and timeout, on the worker's guarded connector under the
same address policy (`allowed_networks`): no second fetcher, so what the editor shows is what
a run would get. The document is taken from the crawl's document hook (where the browser
renderer sits in runs) before it is parsed. Pages are kept a few minutes, in this process and
within a byte budget, so typing selectors re-reads the kept page instead of asking the site
again; the items come from the crawler's own `extract_items`."""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import aiohttp
from cssselect import SelectorError
from parsel import Selector
from servicekit.net import AddressPolicy, guarded_connector, refused_header

from scraper_manager.crawler.engine import CachedItems, Crawl, CrawlConfig, Response
from scraper_manager.crawler.extraction import extract_items
from scraper_manager.crawler.text import clean_value, decode
from scraper_manager.dashboard.forms import parse_selectors
from scraper_manager.models import Scraper
from scraper_manager.settings import Settings

# Items shown under the editor: enough to judge the selectors, short enough to read.
PREVIEW_ITEMS = 20
# A kept page is reused this long, then fetched again.
KEPT_SECONDS = 300.0
# Kept pages, all together, at most this many bytes in a process (oldest dropped first).
KEPT_BYTES = 20 * 1024 * 1024


@dataclass(frozen=True)
class StartPage:
    url: str  # after redirects
    status: int
    body: bytes
    charset: str | None
    truncated: bool
    fetched_at: float  # time.monotonic()


@dataclass(frozen=True)
class NoStartPage:
    """Why the crawler gave no document to read selectors on."""

    reason: str


@dataclass(frozen=True)
class Extracted:
    items: list[dict[str, Any]]  # at most PREVIEW_ITEMS
    total: int  # how many the page holds
    fields: list[str]  # the columns to show, in the order written
    error: str | None = None  # a selector that is not CSS nor XPath, or a bad line


def extract_preview(page: StartPage, item_selector: str, fields_text: str) -> Extracted:
    """The items the selectors, as typed, extract from `page` (total: any text in, items or
    the reason there are none out)."""
    selectors, error = parse_selectors(fields_text)
    if error is not None:
        return Extracted([], 0, [], error)
    document = Selector(text=decode(page.body, page.charset))
    try:
        items = extract_items(
            document, page.url, page.status, selectors, item_selector.strip() or None
        )
    except (ValueError, SelectorError) as exc:
        return Extracted([], 0, [], f"Not a CSS or XPath selector: {exc}")
    fields = list(selectors) or ["url", "status", "title", "description"]
    if selectors and "url" not in selectors:
        fields.append("url")
    cleaned = [clean_value(item) for item in items[:PREVIEW_ITEMS]]
    return Extracted(cleaned, len(items), fields)


class StartPages:
    """Start pages kept per scraper and URL, within KEPT_BYTES, each for KEPT_SECONDS."""

    def __init__(self, kept_seconds: float = KEPT_SECONDS, kept_bytes: int = KEPT_BYTES) -> None:
        self.kept_seconds = kept_seconds
        self.kept_bytes = kept_bytes
        self._pages: OrderedDict[tuple[int, str], StartPage] = OrderedDict()
        self._locks: dict[tuple[int, str], asyncio.Lock] = {}

    def kept(self, scraper_id: int, url: str) -> StartPage | None:
        page = self._pages.get((scraper_id, url))
        if page is None or time.monotonic() - page.fetched_at > self.kept_seconds:
            return None
        return page

    def keep(self, scraper_id: int, url: str, page: StartPage) -> None:
        self._pages[(scraper_id, url)] = page
        self._pages.move_to_end((scraper_id, url))
        while sum(len(p.body) for p in self._pages.values()) > self.kept_bytes:
            self._pages.popitem(last=False)

    def forget(self, scraper_id: int) -> None:
        for key in [k for k in self._pages if k[0] == scraper_id]:
            del self._pages[key]

    async def get(
        self, scraper: Scraper, settings: Settings, *, fresh: bool = False
    ) -> StartPage | NoStartPage:
        """The scraper's start page, kept or fetched now (once for concurrent asks)."""
        key = (scraper.id or 0, scraper.url)
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            page = None if fresh else self.kept(*key)
            if page is not None:
                return page
            fetched = await fetch_start_page(scraper, settings)
            if isinstance(fetched, StartPage):
                self.keep(*key, fetched)
            return fetched


def preview_config(scraper: Scraper, settings: Settings) -> CrawlConfig:
    """The run's crawl configuration (runner.py) cut to the start page alone: no links
    followed, no retries, no proxy pool (the page is read from the service's own address)."""
    return CrawlConfig(
        url=scraper.url,
        headers={k: v for k, v in scraper.headers.items() if refused_header(k) is None},
        rate_limit=scraper.rate_limit,
        max_pages=1,
        max_depth=0,
        obey_robots=scraper.obey_robots,
        concurrency=1,
        timeout_seconds=scraper.timeout_seconds,
        max_retries=0,
        max_response_bytes=settings.max_response_bytes,
        max_redirects=settings.max_redirects,
    )


async def fetch_start_page(scraper: Scraper, settings: Settings) -> StartPage | NoStartPage:
    config = preview_config(scraper, settings)
    documents: list[Response] = []

    async def keep_document(response: Response) -> Response:
        documents.append(response)
        return response

    async def no_items(batch: list[tuple[str, dict[str, Any]] | CachedItems]) -> None:
        return None

    policy = AddressPolicy.allowing(settings.allowed_networks)
    async with aiohttp.ClientSession(connector=guarded_connector(policy, limit=0)) as http:
        crawl = Crawl(
            config,
            http,
            user_agent=settings.user_agent,
            on_items=no_items,
            stop=asyncio.Event(),
            render=keep_document,
        )
        stats = await crawl.run()
    if documents:
        document = documents[0]
        return StartPage(
            document.url,
            document.status,
            document.body,
            document.charset,
            document.truncated,
            time.monotonic(),
        )
    if stats.status_counts.get("robots_denied"):
        return NoStartPage("robots.txt forbids this page to the crawler (the scraper obeys it).")
    if stats.status_counts.get("refused"):
        return NoStartPage(f"The address policy refused the start page: {stats.last_error}")
    if stats.last_error:
        return NoStartPage(f"The start page could not be read: {stats.last_error}")
    return NoStartPage("The start page is not an HTML document: there is nothing to select in.")
