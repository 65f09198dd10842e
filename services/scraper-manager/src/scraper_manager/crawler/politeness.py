"""Politeness: a token bucket per scraper (requests per second) and robots.txt via protego."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

import aiohttp
from protego import Protego

from scraper_manager.crawler.runlog import RunLog
from scraper_manager.crawler.text import decode

# Google reads the first 500 KiB of a robots.txt; so do we, never more.
MAX_ROBOTS_BYTES = 500 * 1024


class TokenBucket:
    """At most `rate` requests per second with no bursts: each acquire waits for its slot,
    so the gaps between requests are 1/rate seconds."""

    def __init__(self, rate: float) -> None:
        self.interval = 1.0 / rate
        self._next = 0.0
        # For the run log's summary: how often and how long requests waited for a slot.
        self.waits = 0
        self.waited_seconds = 0.0
        # Turns taken (pages, their redirect hops, a browser page's own requests).
        self.taken = 0

    def slow_down_to(self, interval: float) -> None:
        self.interval = max(self.interval, interval)

    def take(self) -> float:
        """Take the next slot; the seconds to wait for it (0: now). No lock: nothing between
        reading and taking the slot awaits, so no other task can come in between."""
        now = time.monotonic()
        wait = self._next - now
        self._next = max(now, self._next) + self.interval
        self.taken += 1
        if wait <= 0:
            return 0.0
        self.waits += 1
        self.waited_seconds += wait
        return wait

    async def acquire(self) -> None:
        wait = self.take()
        if wait:
            await asyncio.sleep(wait)


async def _read_at_most(response: aiohttp.ClientResponse, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while size < limit:
        chunk = await response.content.read(limit - size)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


class RobotsRules:
    """robots.txt of each origin, fetched once per run; a missing file allows everything."""

    def __init__(
        self,
        http: aiohttp.ClientSession,
        user_agent: str,
        log: RunLog | None = None,
        pace: Callable[[str], Awaitable[None]] | None = None,
    ) -> None:
        self._http = http
        self._agent = user_agent
        self._log = log
        # The host's shared budget: a robots.txt request is a request to the site like any.
        self._pace = pace
        self._rules: dict[str, Protego | None] = {}

    async def _for(self, url: str) -> Protego | None:
        parts = urlsplit(url)
        origin = f"{parts.scheme}://{parts.netloc}"
        if origin not in self._rules:
            status: int | None = None
            error: str | None = None
            if self._pace is not None:
                await self._pace(f"{origin}/robots.txt")
            try:
                async with self._http.get(
                    f"{origin}/robots.txt", timeout=aiohttp.ClientTimeout(total=10)
                ) as response:
                    status = response.status
                    text = (
                        decode(await _read_at_most(response, MAX_ROBOTS_BYTES), response.charset)
                        if response.status == 200
                        else ""
                    )
            except (aiohttp.ClientError, TimeoutError) as exc:
                text = ""
                error = f"{type(exc).__name__}: {exc}"
            rules = Protego.parse(text) if text else None
            self._rules[origin] = rules
            if self._log is not None:
                delay = rules.crawl_delay(self._agent) if rules is not None else None
                self._log.info(
                    "robots.txt fetched" if error is None else "robots.txt unreachable",
                    url=f"{origin}/robots.txt",
                    status=status,
                    error=error,
                    crawl_delay=float(delay) if delay is not None else None,
                    rules=rules is not None,
                )
        return self._rules[origin]

    async def allowed(self, url: str) -> bool:
        rules = await self._for(url)
        return True if rules is None else bool(rules.can_fetch(url, self._agent))

    async def crawl_delay(self, url: str) -> float | None:
        rules = await self._for(url)
        delay = rules.crawl_delay(self._agent) if rules is not None else None
        return float(delay) if delay is not None else None

    def known_crawl_delay(self, url: str) -> float | None:
        """The crawl delay of a robots.txt already read this run, without fetching one."""
        parts = urlsplit(url)
        rules = self._rules.get(f"{parts.scheme}://{parts.netloc}")
        delay = rules.crawl_delay(self._agent) if rules is not None else None
        return float(delay) if delay is not None else None
