"""One crawl: breadth-first from the start URL, `concurrency` fetchers sharing a token bucket,
robots.txt obeyed, retries with backoff, proxies in rotation, items handed over in batches.

Every request goes through the session the worker built on servicekit's address guard, so the
start URL, each redirect hop (followed here, one request each) and each followed link connect
only where the policy allows. Through a proxy, which makes the connection itself, each URL is
resolved and checked by `proxy_target` first (a name that does not resolve here is refused) and
a plain http request is handed to the proxy for the checked address. A redirect to another
origin carries none of the scraper's headers. Bodies are read up to a cap; large pages are parsed in a
thread, off the event loop."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar
from urllib.parse import urljoin, urlsplit

import aiohttp
import structlog
from opentelemetry import trace
from opentelemetry.trace import SpanKind
from parsel import Selector
from servicekit.net import AddressRefused, ProxyTarget, refusal_of
from servicekit.tracing import tracer, tracing_enabled
from yarl import URL

from scraper_manager.crawler.deadlines import Deadlines
from scraper_manager.crawler.extraction import (
    canonical,
    extract_items,
    extract_links,
    follow_pattern,
)
from scraper_manager.crawler.frontier import Frontier
from scraper_manager.crawler.host_budget import HostBudget, host_interval, host_of, wait_for_slot
from scraper_manager.crawler.patterns import LinkPattern
from scraper_manager.crawler.politeness import RobotsRules, TokenBucket
from scraper_manager.crawler.revalidation import StoredPages, validator
from scraper_manager.crawler.runlog import RunLog, without_credentials
from scraper_manager.crawler.text import clean_value, decode

logger = structlog.get_logger(__name__)
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
READ_CHUNK = 64 * 1024
PARSE_INLINE_BYTES = 256 * 1024
PROXY_COOL_DOWN_SECONDS = 30.0
STOP_GRACE_SECONDS = 1.0
# The first fetch and one in FETCH_SPAN_EVERY get a span of their own: a 100,000-page crawl
# is a run span with about a thousand fetch spans, not 100,000. Failed requests are events on
# whichever span is current (the run's, or a sampled fetch's).
FETCH_SPAN_EVERY = 100


@dataclass(frozen=True)
class CachedItems:
    """A page answered 304 in a batch of items: where the batch is written, the page's row
    of the page cache (`page_cache`, row `key`) is marked seen and its stored items (if the
    row is of extraction `fingerprint`) are copied in SQL with the URL stored there, never
    decoded here. `count`: how many were stored when the run started (0: a row to mark
    seen only)."""

    key: str
    fingerprint: str
    count: int


# A batch in crawl order: an item as extracted (its page's URL, its fields), or a 304 page's.
Collected = tuple[str, dict[str, Any]] | CachedItems
ItemsSink = Callable[[list[Collected]], Awaitable[None]]
ProxyRoute = Callable[[str], Awaitable[ProxyTarget]]
# A page's document as the browser leaves it after its scripts ran (crawler.browser).
Renderer = Callable[["Response"], Awaitable["Response"]]
# A crawl's requests are timed by its `Deadlines`, not by aiohttp (nor the session's default).
NO_CLIENT_TIMEOUT = aiohttp.ClientTimeout(total=None)
# Never carried to another origin, whoever set them.
CREDENTIAL_HEADERS = frozenset({"authorization", "cookie", "proxy-authorization"})


@dataclass(frozen=True)
class CrawlConfig:
    url: str
    headers: dict[str, str] = field(default_factory=dict)
    rate_limit: float = 5
    max_pages: int = 100
    max_depth: int | None = None
    follow: str | None = None
    selectors: dict[str, str] = field(default_factory=dict)
    item_selector: str | None = None
    obey_robots: bool = True
    concurrency: int = 4
    timeout_seconds: float = 30
    proxies: tuple[str, ...] = ()
    max_retries: int = 3
    max_response_bytes: int = 5 * 1024 * 1024
    max_redirects: int = 10
    max_link_length: int = 2048
    max_links_per_page: int = 5000
    # The operator's cap of requests per second per host, across runs and workers (None: only
    # robots.txt crawl delays are shared).
    host_budget_per_second: float | None = None


class TooManyRedirects(Exception):
    """A redirect chain longer than `max_redirects` (not retried)."""


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes
    truncated: bool
    charset: str | None
    content_type: str
    retry_after: str | None
    url: str  # after redirects
    etag: str | None = None
    last_modified: str | None = None


class NotModified:
    """A 304: no body, and what it would say is the stored page's, so nothing but the URL
    that answered is kept (a `Response` costs more to build than this whole answer)."""

    __slots__ = ("url",)
    status: ClassVar[int] = 304

    def __init__(self, url: str) -> None:
        self.url = url


@dataclass
class CrawlStats:
    pages_fetched: int = 0
    items_collected: int = 0
    requests_failed: int = 0
    retries: int = 0
    bytes: int = 0
    status_counts: Counter[str] = field(default_factory=Counter)
    last_error: str | None = None
    # Pages answered 304 whose stored items and links were reused.
    not_modified: int = 0
    items_reused: int = 0


class ProxyRotation:
    """Proxies drawn in turn; one that fails sits out a cool-down."""

    def __init__(self, proxies: tuple[str, ...], log: RunLog | None = None) -> None:
        self._proxies = list(proxies)
        self._next = 0
        self._resting: dict[str, float] = {}
        self._log = log

    def take(self) -> str | None:
        if not self._proxies:
            return None
        now = time.monotonic()
        for _ in range(len(self._proxies)):
            proxy = self._proxies[self._next % len(self._proxies)]
            self._next += 1
            if self._resting.get(proxy, 0) <= now:
                return proxy
        return min(self._proxies, key=lambda p: self._resting.get(p, 0))

    def failed(self, proxy: str | None) -> None:
        if proxy is not None:
            self._resting[proxy] = time.monotonic() + PROXY_COOL_DOWN_SECONDS
            if self._log is not None:
                self._log.warning(
                    "proxy benched",
                    proxy=without_credentials(proxy),
                    seconds=PROXY_COOL_DOWN_SECONDS,
                    others=len(self._proxies) - 1,
                )


class Crawl:
    def __init__(
        self,
        config: CrawlConfig,
        http: aiohttp.ClientSession,
        *,
        user_agent: str,
        on_items: ItemsSink,
        stop: asyncio.Event,
        batch_size: int = 100,
        proxy_http: aiohttp.ClientSession | None = None,
        proxy_target: ProxyRoute | None = None,
        log: RunLog | None = None,
        pages: StoredPages | None = None,
        render: Renderer | None = None,
        host_budget: HostBudget | None = None,
    ) -> None:
        self.config = config
        # None: HTTP pages; else each HTML document goes through the browser before parsing.
        self.render = render
        # The per-host budget shared with every other run (None: this run's own limit only).
        self.host_budget = host_budget
        # Whether a request may have a host's slot to take: an operator's budget, or a crawl
        # delay (robots.txt, when obeyed) to share.
        self._shares_host = host_budget is not None and (
            config.host_budget_per_second is not None or config.obey_robots
        )
        self.host_waits = 0
        self.host_waited_seconds = 0.0
        # Slots of the shared budget this run reserved (its requests' and its browser's).
        self.host_slots = 0
        # The pages the scraper's last runs saw, to revalidate; None: every page fetched whole.
        self.pages = pages
        self.http = http
        self.proxy_http = proxy_http or http
        self.proxy_target = proxy_target
        self.pattern: LinkPattern | None = None
        self.user_agent = user_agent
        self.on_items = on_items
        self.stop = stop
        self.batch_size = batch_size
        self.stats = CrawlStats()
        # Without a log (benchmarks, tests of the engine) lines are counted, never kept.
        self.log = log if log is not None else RunLog(cap=0)
        self.bucket = TokenBucket(config.rate_limit)
        self.robots = RobotsRules(http, user_agent, self.log, pace=self._host_slot)
        self.proxies = ProxyRotation(config.proxies, self.log)
        # (URL, its canonical key, depth): the key is computed once, when the URL is found.
        self._queue: Frontier[tuple[str, str, int]] = Frontier()
        self._seen: set[str] = set()
        self._started = 0
        self._fetches = 0
        self._pending: list[Collected] = []
        self._pending_items = 0
        self._sink_lock = asyncio.Lock()
        # Each request's `timeout_seconds`, on timers its requests share (crawler.deadlines):
        # none of aiohttp's, whose timer per request was a tenth of a 304's CPU.
        self._deadlines = Deadlines(config.timeout_seconds)
        self._own_headers = {"User-Agent": user_agent}
        self._headers = {**self._own_headers, **config.headers}

    def _enqueue(self, url: str, depth: int, key: str | None = None, *, wake: bool = True) -> bool:
        """`key`: the URL's canonical form when the URL is one already (links as extracted
        or stored are), so a page's links cost a set lookup each, not a canonicalisation.
        `wake=False`: the fetcher enqueueing takes the next URL itself (`Frontier.put`).
        Whether the URL was new."""
        if key is None:
            key = canonical(url)
        if key in self._seen:
            return False
        self._seen.add(key)
        self._queue.put((url, key, depth), wake=wake)
        return True

    def _enqueue_links(self, links: list[str], depth: int) -> None:
        """A visited page's links (canonical already), as its fetcher returns for its next
        URL without waiting: the first new one is kept for it, the others wake a fetcher."""
        enqueue = self._enqueue
        wake = False
        for link in links:
            if enqueue(link, depth, link, wake=wake):
                wake = True

    async def run(self) -> CrawlStats:
        # Compiled here, so a pattern stored before RE2 was required fails the run with a reason.
        self.pattern = follow_pattern(self.config.follow)
        self._enqueue(self.config.url, 0)
        workers = [asyncio.create_task(self._work()) for _ in range(self.config.concurrency)]
        joined = asyncio.create_task(self._queue.join())
        stopper = asyncio.create_task(self.stop.wait())
        await asyncio.wait({joined, stopper}, return_when=asyncio.FIRST_COMPLETED)
        if self.stop.is_set():
            # No new requests; in-flight ones get a short grace, then are cancelled.
            await asyncio.wait(workers, timeout=STOP_GRACE_SECONDS)
        for task in (*workers, joined, stopper):
            task.cancel()
        for task in (*workers, joined, stopper):
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self._flush()
        return self.stats

    async def _work(self) -> None:
        queue = self._queue
        while True:
            # Taken in place when there is one (no coroutine per page), else waited for.
            url, key, depth = queue.take_nowait() or await queue.take()
            try:
                # The count is checked after the await and taken before the next one, so
                # concurrent fetchers never oversell `max_pages`.
                if (
                    not self.stop.is_set()
                    and (not self.config.obey_robots or await self._permitted(url))
                    and self._started < self.config.max_pages
                ):
                    self._started += 1
                    await self._visit(url, key, depth)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                refusal = refusal_of(exc)
                if refusal is not None:
                    # A browser page that navigated where the policy refuses.
                    self._refused(url, refusal)
                    continue
                self.stats.requests_failed += 1
                self.stats.last_error = f"{url}: {type(exc).__name__}: {exc}"[:500]
                self.log.error("page failed", url=url, error=f"{type(exc).__name__}: {exc}")
            finally:
                self._queue.task_done()

    async def _permitted(self, url: str) -> bool:
        """robots.txt (and its Crawl-delay) unless the scraper says not to obey it; a denied
        page does not count against `max_pages`."""
        if not self.config.obey_robots:
            return True
        if not await self.robots.allowed(url):
            self.stats.status_counts["robots_denied"] += 1
            self.log.warning("refused by robots.txt", url=url)
            return False
        delay = await self.robots.crawl_delay(url)
        if delay and delay > self.bucket.interval:
            self.bucket.slow_down_to(delay)
            self.log.info("crawl delay applied", seconds=delay, url=url)
        return True

    async def _visit(self, url: str, key: str, depth: int) -> None:
        follow = self.config.max_depth is None or depth < self.config.max_depth
        fetched = await self._fetch(url, follow if self.pages is not None else None, key)
        if fetched is None:
            return
        # The key of the URL that answered (another one's after a redirect).
        answered = key if fetched.url == url else canonical(fetched.url)
        if isinstance(fetched, NotModified):
            if self._reuse(answered, depth, follow):
                return
            # A 304 to a page with nothing stored (a server answering one unasked): fetched
            # whole, once, without validators.
            again = await self._fetch(url, None)
            if again is None or isinstance(again, NotModified):
                return
            fetched = again
            answered = key if fetched.url == url else canonical(fetched.url)
        if fetched.status >= 400 or "html" not in fetched.content_type:
            return
        if self.render is not None:
            fetched = await self.render(fetched)
        # Parsing is CPU work on attacker-sized input: a large page is parsed in a thread so
        # the worker's event loop (heartbeats, probes, other runs) stays responsive; a small
        # one (the common case) costs less than the hop to a thread. Link matching is RE2's
        # linear time on capped links either way.
        items, links = (
            self._parse(fetched, follow)
            if len(fetched.body) <= PARSE_INLINE_BYTES
            else await asyncio.to_thread(self._parse, fetched, follow)
        )
        await self._collect(fetched.url, items)
        # No await from here to the fetcher's next URL (see `_enqueue_links`).
        self._enqueue_links(links, depth + 1)
        if (
            self.pages is not None
            and fetched.status == 200
            and not fetched.truncated
            and (fetched.etag is not None or fetched.last_modified is not None)
        ):
            self.pages.remember(
                answered,
                fetched.url,
                fetched.etag,
                fetched.last_modified,
                items,
                links if follow else None,
            )

    def _reuse(self, key: str, depth: int, follow: bool) -> bool:
        """A 304: the page's stored items and links, as if it had been parsed again. The
        items are not read here: the batch names the stored page and its writer copies them
        in SQL (a decoded item would cost more CPU than the request that found it unchanged)."""
        assert self.pages is not None
        stored = self.pages.stored_raw(key)
        if stored is None:
            return False
        items, links = stored
        self.stats.not_modified += 1
        self.stats.items_reused += items
        # A reference, not items (the page's row is marked seen where it is written, its items
        # copied): it does not fill the batch, whose bound is for items held in memory, and
        # goes with the next beat's write, or the crawl's last.
        self._pending.append(CachedItems(key, self.pages.fingerprint, items))
        self.stats.items_collected += items
        if follow and links:
            # Stored as extracted: canonical already.
            self._enqueue_links(links.split("\n"), depth + 1)
        return True

    def _parse(self, fetched: Response, follow: bool) -> tuple[list[dict[str, Any]], list[str]]:
        page = Selector(text=decode(fetched.body, fetched.charset))
        items = extract_items(
            page, fetched.url, fetched.status, self.config.selectors, self.config.item_selector
        )
        links = (
            extract_links(
                page,
                fetched.url,
                self.config.follow,
                self.pattern,
                max_length=self.config.max_link_length,
                max_links=self.config.max_links_per_page,
            )
            if follow
            else []
        )
        return [clean_value(item) for item in items], links

    def _fetch(
        self, url: str, need_links: bool | None = None, key: str | None = None
    ) -> Awaitable[Response | NotModified | None]:
        """`need_links`: None sends no validators; else a page's stored validators are sent
        when what is stored suffices (its links too, when they will be followed). `key`: the
        URL's canonical form, when known. A fetch without a span of its own is the retries'
        coroutine itself (no coroutine around it)."""
        self._fetches += 1
        sequence = self._fetches
        if not tracing_enabled() or (sequence != 1 and sequence % FETCH_SPAN_EVERY):
            return self._fetch_with_retries(url, need_links, key)
        return self._fetch_in_span(url, need_links, key, sequence)

    async def _fetch_in_span(
        self, url: str, need_links: bool | None, key: str | None, sequence: int
    ) -> Response | NotModified | None:
        with tracer.start_as_current_span(
            "crawl fetch",
            kind=SpanKind.CLIENT,
            attributes={"url.full": without_credentials(url), "crawler.fetch.sequence": sequence},
        ) as span:
            response = await self._fetch_with_retries(url, need_links, key)
            if response is not None:
                span.set_attribute("http.response.status_code", response.status)
            return response

    def _failed(self, url: str, **attributes: str | int) -> None:
        trace.get_current_span().add_event(
            "request failed", {"url.full": without_credentials(url), **attributes}
        )

    async def _fetch_with_retries(
        self, url: str, need_links: bool | None, key: str | None = None
    ) -> Response | NotModified | None:
        attempt = 0
        while True:
            if self.stop.is_set():
                return None
            # `_pace` in place: no coroutine for a request that need not wait.
            wait = self.bucket.take()
            if wait:
                await asyncio.sleep(wait)
            if self._shares_host:
                await self._host_slot(url)
            proxy = self.proxies.take()
            try:
                response = await self._request(url, proxy, need_links, key)
            except (aiohttp.ClientError, AddressRefused, TimeoutError) as exc:
                refusal = refusal_of(exc)
                if refusal is not None:
                    self._refused(url, refusal)
                    return None
                self.proxies.failed(proxy)
                error = f"{type(exc).__name__}: {exc}"
                if attempt < self.config.max_retries:
                    attempt += 1
                    self.stats.retries += 1
                    wait = retry_delay(attempt, None)
                    self.log.warning(
                        "request failed, retrying", url=url, error=error, attempt=attempt, wait=wait
                    )
                    await asyncio.sleep(wait)
                    continue
                self.stats.requests_failed += 1
                self.stats.last_error = f"{url}: {error}"[:500]
                self.log.error("request failed", url=url, error=error, attempts=attempt + 1)
                self._failed(url, error=error, attempts=attempt + 1)
                return None
            if (
                response.status in RETRY_STATUSES
                and attempt < self.config.max_retries
                and isinstance(response, Response)
            ):
                attempt += 1
                self.stats.retries += 1
                wait = retry_delay(attempt, response.retry_after)
                self.log.warning(
                    "request failed, retrying",
                    url=url,
                    status=response.status,
                    attempt=attempt,
                    wait=wait,
                    retry_after=response.retry_after,
                )
                await asyncio.sleep(wait)
                continue
            self.stats.pages_fetched += 1
            if response.status >= 400:
                self.stats.requests_failed += 1
                self.stats.last_error = f"{url}: HTTP {response.status}"
                self.log.error(
                    "request failed", url=url, status=response.status, attempts=attempt + 1
                )
                self._failed(url, status=response.status, attempts=attempt + 1)
            return response

    async def admit(self, url: str) -> None:
        """The turn of a request a browser page makes (through the egress proxy), as a
        page's: the run's rate limit, then the host's shared budget."""
        await self._pace(url)

    async def _pace(self, url: str) -> None:
        """A request's turn: the run's own limit first (its upper bound), then the host's
        budget shared with every run, so waiting for the host never lets the run exceed its
        own rate."""
        # The bucket's slot taken in place (no coroutine unless there is a wait: a request
        # of a run far below its limit costs a subtraction).
        wait = self.bucket.take()
        if wait:
            await asyncio.sleep(wait)
        if self._shares_host:
            await self._host_slot(url)

    async def _host_slot(self, url: str) -> None:
        if self.host_budget is None:
            return
        delay = self.robots.known_crawl_delay(url) if self.config.obey_robots else None
        interval = host_interval(self.config.host_budget_per_second, delay)
        if interval is None:
            return  # no budget to share: not even the URL's host is looked at
        host = host_of(url)
        if host is None:
            return
        waited = await wait_for_slot(self.host_budget, host, interval)
        self.host_slots += 1
        if waited > 0:
            self.host_waits += 1
            self.host_waited_seconds += waited

    def _refused(self, url: str, refusal: AddressRefused) -> None:
        self.stats.status_counts["refused"] += 1
        self.stats.requests_failed += 1
        self.stats.last_error = f"{url}: refused: {refusal}"[:500]
        self.log.error("refused by the address policy", url=url, reason=str(refusal))
        logger.warning("request refused by the address policy", url=url[:500], reason=str(refusal))

    def _conditional(
        self, url: str, need_links: bool | None, key: str | None
    ) -> dict[str, str] | None:
        if need_links is None or self.pages is None:
            return None
        return self.pages.conditional(key if key is not None else canonical(url), need_links)

    async def _request(
        self, url: str, proxy: str | None, need_links: bool | None = None, key: str | None = None
    ) -> Response | NotModified:
        """One request and its redirects, each hop a request of its own (so each connects
        through the guard, or is checked before it goes to the proxy)."""
        current = url
        own, headers = self._own_headers, self._headers  # never changed in place
        for hop in range(self.config.max_redirects + 1):
            if hop:
                await self._pace(current)
            target: str | URL = current
            sent = headers
            if proxy is None:
                if not hop and key is not None and current == key and key.isascii():
                    # A canonical URL (a link as extracted or stored) is percent-encoded
                    # already: handed over as such, not parsed and quoted again per request.
                    target = URL(current, encoded=True)
            elif self.proxy_target is not None:
                # Refused here (not retried) if the worker cannot resolve it or may not reach it.
                routed = await self.proxy_target(current)
                target = routed.url
                if routed.host_header is not None:
                    sent = {**headers, "Host": routed.host_header}
            # Each hop asks with the validators stored for its own URL: a page reached through
            # a redirect is stored under the URL that answered it.
            conditional = self._conditional(current, need_links, None if hop else key)
            if conditional:
                sent = {**sent, **conditional}
            session = self.proxy_http if proxy is not None else self.http
            # The limit covers the hop whole: connecting, the answer, the body read.
            with self._deadlines.limit():
                async with session.get(
                    target,
                    headers=sent,
                    proxy=proxy,
                    allow_redirects=False,
                    timeout=NO_CLIENT_TIMEOUT,
                ) as response:
                    self.stats.status_counts[str(response.status)] += 1
                    location = (
                        response.headers.get("Location")
                        if response.status in REDIRECT_STATUSES
                        else None
                    )
                    if location:
                        following = urljoin(current, location)
                        if urlsplit(following).scheme in {"http", "https"}:
                            headers = next_hop_headers(headers, own, current, following)
                            current = following
                            continue
                    if response.status == 304:
                        # No body (RFC 9110 §15.4.5), and what it says is the stored page's:
                        # nothing read or parsed, not even its headers.
                        return NotModified(current)
                    body, truncated = await self._read(response)
                    return Response(
                        status=response.status,
                        body=body,
                        truncated=truncated,
                        charset=response.charset,
                        content_type=response.headers.get("Content-Type", ""),
                        retry_after=response.headers.get("Retry-After"),
                        url=current,
                        etag=validator(response.headers.get("ETag")),
                        last_modified=validator(response.headers.get("Last-Modified")),
                    )
        raise TooManyRedirects(f"more than {self.config.max_redirects} redirects")

    async def _read(self, response: aiohttp.ClientResponse) -> tuple[bytes, bool]:
        """At most `max_response_bytes` of the body; a longer one is cut there, logged, and
        its connection dropped without reading the rest."""
        limit = self.config.max_response_bytes
        chunks: list[bytes] = []
        size = 0
        while size < limit:
            chunk = await response.content.read(min(limit - size, READ_CHUNK))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        truncated = size >= limit and bool(await response.content.read(1))
        self.stats.bytes += size
        if truncated:
            response.close()
            self.stats.status_counts["truncated"] += 1
            logger.warning(
                "page truncated at the size cap", url=str(response.url)[:500], limit=limit
            )
        return b"".join(chunks), truncated

    async def _collect(self, url: str, items: list[dict[str, Any]]) -> None:
        self._pending.extend((url, item) for item in items)
        await self._counted(len(items))

    async def _counted(self, items: int) -> None:
        self.stats.items_collected += items
        self._pending_items += items
        if self._pending_items >= self.batch_size:
            # Shielded: a fetcher cancelled at stop must not cut a database write in half.
            await asyncio.shield(self._flush())

    async def flush(self) -> None:
        """Hand over the items collected since the last batch, however few."""
        await self._flush()

    @property
    def sink_lock(self) -> asyncio.Lock:
        """Held while items are handed over (by the crawl, or by the worker's heartbeat)."""
        return self._sink_lock

    def take_items(self) -> list[Collected]:
        """The items collected since the last batch, taken (the worker's heartbeat writes
        those of all its runs at once)."""
        taken, self._pending = self._pending, []
        self._pending_items = 0
        return taken

    def give_back(self, items: list[Collected]) -> None:
        """Items taken but not written (the beat failed): first in the next batch."""
        self._pending[:0] = items
        self._pending_items += sum(not isinstance(i, CachedItems) for i in items)

    async def _flush(self) -> None:
        async with self._sink_lock:
            if self._pending:
                batch = self.take_items()
                await self.on_items(batch)


def retry_delay(attempt: int, retry_after: str | None) -> float:
    """Seconds before the next attempt: the server's Retry-After (capped) or exponential."""
    # A crawled server's header: isascii() because "²" passes isdigit() but not float().
    seconds = retry_after.strip() if retry_after else ""
    if seconds.isascii() and seconds.isdigit():
        return min(float(seconds), 60.0)
    return float(min(0.5 * 2 ** (attempt - 1), 10.0))


def origin(url: str) -> tuple[str, str, int] | None:
    """Scheme, host and port of a URL (default ports filled in); None if it has no valid one."""
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        return None
    if parts.hostname is None:
        return None
    return parts.scheme, parts.hostname, port or (443 if parts.scheme == "https" else 80)


def next_hop_headers(
    headers: Mapping[str, str], own: Mapping[str, str], current: str, target: str
) -> dict[str, str]:
    """The headers of the redirect hop from `current` to `target`. Within an origin, the same.
    To another origin, only the crawler's `own` headers: the scraper's headers (credentials,
    API keys, anything) were given for the site it named, and a redirect is the server's
    choice, so none follow it; the chain keeps them dropped even if it comes back."""
    same = origin(current)
    if same is not None and same == origin(target):
        return dict(headers)
    return {k: v for k, v in own.items() if k.lower() not in CREDENTIAL_HEADERS}
