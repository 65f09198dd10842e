"""Items and links out of a page, with parsel (Scrapy's selectors) and w3lib."""

from __future__ import annotations

from typing import Any
from urllib.parse import urljoin, urlsplit

from parsel import Selector
from w3lib.url import canonicalize_url

from scraper_manager.crawler.patterns import LinkPattern, compile_pattern

DEFAULT_FIELDS = ("url", "status", "title", "description")


def _select(node: Selector, expression: str) -> list[str]:
    found = node.xpath(expression) if expression.startswith(("/", "(")) else node.css(expression)
    values = [v.strip() for v in found.getall()]
    return [v for v in values if v]


def _value(values: list[str]) -> Any:
    if not values:
        return None
    return values[0] if len(values) == 1 else values


def extract_items(
    page: Selector,
    url: str,
    status: int,
    selectors: dict[str, str],
    item_selector: str | None,
) -> list[dict[str, Any]]:
    """Without selectors: the page's URL, status, title and meta description. With them: one
    item per page, or one per element matching `item_selector`, fields evaluated inside it."""
    if not selectors:
        return [
            {
                "url": url,
                "status": status,
                "title": _value(_select(page, "title::text")),
                "description": _value(_select(page, 'meta[name="description"]::attr(content)')),
            }
        ]
    nodes = (
        list(
            page.xpath(item_selector)
            if item_selector.startswith(("/", "("))
            else page.css(item_selector)
        )
        if item_selector
        else [page]
    )
    items = []
    for node in nodes:
        item = {field: _value(_select(node, expression)) for field, expression in selectors.items()}
        item.setdefault("url", url)
        items.append(item)
    return items


def canonical(url: str) -> str:
    return canonicalize_url(url, keep_fragments=False)


def follow_pattern(follow: str | None) -> LinkPattern | None:
    """The compiled `re:` pattern of `follow`, once per crawl."""
    return compile_pattern(follow[3:]) if follow and follow.startswith("re:") else None


def extract_links(
    page: Selector,
    base_url: str,
    follow: str | None,
    pattern: LinkPattern | None = None,
    *,
    max_length: int = 2048,
    max_links: int = 5000,
) -> list[str]:
    """Links to follow: those matching `follow` (CSS/XPath of links, or `re:<regex>` on the
    URL, compiled by RE2 into `pattern`), or by default every link on the same host.
    Canonical, without duplicates; links longer than `max_length` are dropped and at most
    `max_links` hrefs of a page are looked at, which bounds the matching work per page."""
    if follow and not follow.startswith("re:"):
        hrefs = (
            _select(page, follow)
            if "::attr" in follow or follow.startswith(("/", "("))
            else [h for node in (page.css(follow)) for h in node.css("::attr(href)").getall()]
        )
    else:
        hrefs = page.css("a::attr(href)").getall()
    host = urlsplit(base_url).hostname
    if pattern is None:
        pattern = follow_pattern(follow)
    links: list[str] = []
    seen: set[str] = set()
    for href in hrefs[:max_links]:
        if len(href) > max_length:
            continue
        absolute = urljoin(base_url, href.strip())
        if len(absolute) > max_length:
            continue
        parts = urlsplit(absolute)
        if parts.scheme not in {"http", "https"}:
            continue
        if pattern is not None:
            if not pattern.search(absolute):
                continue
        elif follow is None and parts.hostname != host:
            continue
        link = canonical(absolute)
        if link not in seen:
            seen.add(link)
            links.append(link)
    return links
