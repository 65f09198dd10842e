"""Incremental crawls: per scraper and page (its canonical URL), the validators the last run
saw (`ETag`, `Last-Modified`) and what the page gave (its items, its links), so the next run
asks `If-None-Match` / `If-Modified-Since` and, answered 304, reuses them without reading or
parsing the page.

What a page gives depends on the scraper's extraction (selectors, item selector, follow): the
stored rows carry a fingerprint of it, and rows of another fingerprint are not used (a
scraper whose selectors changed fetches its pages whole once). A run reads its scraper's
stored pages once, at its start, in one query (at most its `max_pages` most recently seen):
validators, links one a line (split only for a page that answers 304) and how many
items the page gave, not the items themselves: a 304 page's items are copied from its row by
the statement that writes the run's items (`CachedItems`), never decoded in Python. A query per
304 would cost more CPU than the parse it saves. What a run learns is written in batches, with
the heartbeat."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession

from scraper_manager.crawler.text import clean_text, clean_value

# Validators longer than this are not kept (no real server sends them; a hostile one could).
MAX_VALIDATOR_LENGTH = 512


@dataclass(frozen=True)
class Validators:
    etag: str | None
    last_modified: str | None
    # False when the page was stored at the depth limit, its links never read.
    has_links: bool


@dataclass(frozen=True)
class StoredPage:
    # Its URL as fetched stays in the database with its items (`CachedItems`).
    items: int  # how many: they stay in the database
    links: list[str] | None


def extraction_fingerprint(
    selectors: Mapping[str, str], item_selector: str | None, follow: str | None
) -> str:
    """What a page's stored items and links depend on, as a digest."""
    described = json.dumps(
        {"selectors": dict(selectors), "item_selector": item_selector, "follow": follow},
        sort_keys=True,
    )
    return hashlib.sha256(described.encode()).hexdigest()


def validator(value: str | None) -> str | None:
    """A response's validator header as it may be sent back: visible ASCII and spaces, within
    a length; anything else is no validator (total: any header value in, a value or None)."""
    if value is None:
        return None
    value = value.strip()
    if not value or len(value) > MAX_VALIDATOR_LENGTH:
        return None
    if not (value.isascii() and value.isprintable()):  # visible ASCII and spaces only
        return None
    return value


def conditional_headers(validators: Validators | None) -> dict[str, str]:
    """The headers that ask for a 304 when the page is unchanged."""
    if validators is None:
        return {}
    headers: dict[str, str] = {}
    if validators.etag is not None:
        headers["If-None-Match"] = validators.etag
    if validators.last_modified is not None:
        headers["If-Modified-Since"] = validators.last_modified
    return headers


_LOAD = text(
    """
    SELECT url, etag, last_modified, jsonb_array_length(items),
           -- Links one a line (a canonical URL has no raw newline): split, not JSON-decoded.
           CASE WHEN links IS NOT NULL THEN coalesce(
               (SELECT string_agg(link, E'\n' ORDER BY n)
                FROM jsonb_array_elements_text(links) WITH ORDINALITY AS l(link, n)), '')
           END
    FROM page_cache
    WHERE scraper_id = :scraper_id AND fingerprint = :fingerprint
    ORDER BY seen_at DESC LIMIT :limit
    """
)
_PRUNE = text(
    """
    DELETE FROM page_cache
    WHERE scraper_id = :scraper_id AND seen_at < now() - make_interval(secs => :seconds)
    """
)
_UPSERT = text(
    """
    INSERT INTO page_cache (scraper_id, url, page_url, fingerprint, etag, last_modified,
                            items, links, seen_at)
    SELECT :scraper_id, p.url, p.page_url, :fingerprint, p.etag, p.last_modified, p.items,
           p.links, now()
    FROM unnest(CAST(:urls AS text[]), CAST(:page_urls AS text[]), CAST(:etags AS text[]),
                CAST(:last_modified AS text[]), CAST(:items AS jsonb[]),
                CAST(:links AS jsonb[])) AS p(url, page_url, etag, last_modified, items, links)
    ON CONFLICT (scraper_id, url) DO UPDATE SET
        page_url = excluded.page_url, fingerprint = excluded.fingerprint,
        etag = excluded.etag, last_modified = excluded.last_modified,
        items = excluded.items, links = excluded.links, seen_at = excluded.seen_at
    """
)


class StoredPages:
    """A scraper's stored pages in PostgreSQL, as one run uses them."""

    def __init__(
        self,
        session_factory: async_sessionmaker[AsyncSession],
        scraper_id: int,
        fingerprint: str,
        *,
        keep_days: float,
        limit: int,
    ) -> None:
        self.session_factory = session_factory
        self.scraper_id = scraper_id
        self.fingerprint = fingerprint
        self.keep_days = keep_days
        self.limit = limit
        # Per page: the headers that ask for a 304 (built once, shared by its requests and
        # never changed), whether its links were stored, its items' count, its links.
        self._pages: dict[str, tuple[dict[str, str], bool, int, str | None]] = {}
        self._learned: dict[str, tuple[str, str | None, str | None, str, str | None]] = {}

    async def load(self) -> int:
        """Forget pages not seen for `keep_days`, then read the validators of the rest."""
        async with self.session_factory() as session, session.begin():
            connection = await session.connection()
            await connection.execute(
                _PRUNE, {"scraper_id": self.scraper_id, "seconds": self.keep_days * 86400}
            )
            rows = await connection.execute(
                _LOAD,
                {
                    "scraper_id": self.scraper_id,
                    "fingerprint": self.fingerprint,
                    "limit": self.limit,
                },
            )
            pages = self._pages
            # All at once: a row at a time costs the driver's adapter calls per row.
            for url, etag, last_modified, items, links in rows.all():
                headers = {}
                if etag is not None:
                    headers["If-None-Match"] = etag
                if last_modified is not None:
                    headers["If-Modified-Since"] = last_modified
                pages[url] = (headers, links is not None, items, links)
        return len(pages)

    def validators(self, url: str) -> Validators | None:
        found = self._pages.get(url)
        if found is None:
            return None
        headers, has_links, _, _ = found
        return Validators(headers.get("If-None-Match"), headers.get("If-Modified-Since"), has_links)

    def conditional(self, url: str, need_links: bool) -> dict[str, str] | None:
        """The headers asking for a 304 for a page (None: none to send, or not what is
        needed: its links, when they will be followed). Shared: never to be changed."""
        found = self._pages.get(url)
        if found is None or (need_links and not found[1]) or not found[0]:
            return None
        return found[0]

    def stored_raw(self, url: str) -> tuple[int, str | None] | None:
        """A page's item count and links one a line (None: its links were not stored), as
        loaded: what a 304 reuses, without a `StoredPage` built per page."""
        found = self._pages.get(url)
        return None if found is None else (found[2], found[3])

    def stored(self, url: str) -> StoredPage | None:
        found = self.stored_raw(url)
        if found is None:
            return None
        items, links = found
        if links is None:
            return StoredPage(items, None)
        return StoredPage(items, links.split("\n") if links else [])

    def remember(
        self,
        url: str,
        page_url: str,
        etag: str | None,
        last_modified: str | None,
        items: list[dict[str, Any]],
        links: list[str] | None,
    ) -> None:
        """A page answered with validators: kept for the next run (written at the next flush;
        a page seen twice in a batch keeps its latest answer)."""
        self._learned[url] = (
            clean_text(page_url),
            etag,
            last_modified,
            json.dumps(clean_value(items), default=str),
            None if links is None else json.dumps([clean_text(link) for link in links]),
        )

    async def flush(self) -> None:
        """The pages learned since the last flush, in one statement. (A page answered 304 is
        marked seen where the run's items are written: `CachedItems`.)"""
        learned, self._learned = self._learned, {}
        if not learned:
            return
        urls = list(learned)
        rows = [learned[url] for url in urls]
        async with self.session_factory() as session, session.begin():
            connection = await session.connection()
            await connection.execute(
                _UPSERT,
                {
                    "scraper_id": self.scraper_id,
                    "fingerprint": self.fingerprint,
                    "urls": [clean_text(url) for url in urls],
                    "page_urls": [row[0] for row in rows],
                    "etags": [row[1] for row in rows],
                    "last_modified": [row[2] for row in rows],
                    "items": [row[3] for row in rows],
                    "links": [row[4] for row in rows],
                },
            )
