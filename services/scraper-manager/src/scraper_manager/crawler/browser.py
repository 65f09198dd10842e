"""Pages rendered by a headless Chromium (`render: "browser"`): Playwright driving Debian's
`chromium` (`executable_path`; Playwright's own browser download is not used).

The page's document is fetched by the crawl engine exactly as for HTTP pages (robots, rate
limit, retries, proxies, the scraper's headers, redirects hop by hop, the size cap) and handed
to the browser with `route.fulfill`; everything the page then asks for — scripts, XHR and
fetch, iframes, redirects, navigations, WebSockets — leaves Chromium only through the run's
egress proxy (`scraper_manager.crawler.egress`), which applies the crawler's address policy
to each request and connects to the address it checked. Images, media and fonts are not
fetched at all (by default), and a page gets `timeout_seconds` to load, after which it fails.

One Chromium per worker, launched on first use; at most `browser_pages_per_worker` pages open
at once across all of the worker's runs; each run a browser context of its own (cookies,
storage, its own egress proxy), closed with the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterable
from dataclasses import replace
from typing import Literal
from urllib.parse import urlsplit

from playwright.async_api import (
    Browser,
    BrowserContext,
    Playwright,
    Request,
    Route,
    async_playwright,
)
from playwright.async_api import (
    Error as PlaywrightError,
)
from playwright.async_api import (
    TimeoutError as PlaywrightTimeout,
)
from servicekit.net import AddressRefused

from scraper_manager.crawler.egress import EgressProxy
from scraper_manager.crawler.engine import Crawl, Response

# A launch-wide proxy nothing listens on: a request of a context without its own proxy (there
# should be none) fails instead of going out unchecked. `<-loopback>`: Chromium's default
# bypass sends localhost and 127.0.0.1 around any proxy; this removes that rule.
FAIL_CLOSED_PROXY = "http://127.0.0.1:9"
CHROMIUM_ARGS = (
    f"--proxy-server={FAIL_CLOSED_PROXY}",
    "--proxy-bypass-list=<-loopback>",
    # HTTP/3 is UDP, which no HTTP proxy carries: Chromium would skip the proxy for it.
    "--disable-quic",
    # WebRTC reaches peers over UDP unless told to use the proxy only.
    "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
    "--disable-features=DnsOverHttps,NetworkPrediction",
    "--dns-prefetch-disable",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--no-first-run",
    "--disable-gpu",
    # Containers give /dev/shm 64 MiB; Chromium's renderers need more.
    "--disable-dev-shm-usage",
    # Unprivileged containers have no user namespaces for Chromium's sandbox; what a page can
    # reach is decided by the egress proxy, not by the sandbox.
    "--no-sandbox",
)
DEFAULT_BLOCKED = frozenset({"image", "media", "font"})
# After `load`, the page may keep fetching (XHR that builds the items): wait for the network
# to be quiet (Playwright: 500 ms without requests) within the page's time limit.
SETTLE: Literal["networkidle"] = "networkidle"


def pace_and_route(egress: EgressProxy, crawl: Crawl) -> None:
    """A browser run's pages ask for more under the run's rules: each of their requests takes
    the run's turn (its rate limit, then its host's shared budget) and leaves through the
    run's proxy rotation (the same bench for a proxy that fails)."""
    egress.admit = crawl.admit
    egress.upstream = crawl.proxies.take
    egress.upstream_failed = crawl.proxies.failed


class BrowserPageFailed(Exception):
    """A page the browser could not render (crashed, closed, navigated to an error)."""


class BrowserPool:
    """The worker's Chromium and its page slots."""

    def __init__(self, chromium: str, pages: int) -> None:
        self.chromium = chromium
        self.slots = asyncio.Semaphore(pages)
        self._lock = asyncio.Lock()
        self._playwright: Playwright | None = None
        self._browser: Browser | None = None

    async def browser(self) -> Browser:
        async with self._lock:
            if self._browser is not None and self._browser.is_connected():
                return self._browser
            if self._playwright is None:
                self._playwright = await async_playwright().start()
            self._browser = await self._playwright.chromium.launch(
                executable_path=self.chromium, headless=True, args=list(CHROMIUM_ARGS)
            )
            return self._browser

    async def context(self, egress: EgressProxy, user_agent: str) -> BrowserContext:
        browser = await self.browser()
        return await browser.new_context(
            proxy={"server": egress.url, "bypass": "<-loopback>"},
            user_agent=user_agent,
            # A service worker's fetches are not seen by request interception; blocked.
            service_workers="block",
            accept_downloads=False,
        )

    async def close(self) -> None:
        async with self._lock:
            if self._browser is not None:
                with contextlib.suppress(PlaywrightError):
                    await self._browser.close()
            if self._playwright is not None:
                await self._playwright.stop()
            self._browser = self._playwright = None


class PageRenderer:
    """One run's browser pages: its context, its egress proxy, its blocked resource types."""

    def __init__(
        self,
        pool: BrowserPool,
        egress: EgressProxy,
        *,
        user_agent: str,
        timeout_seconds: float,
        blocked: Iterable[str] = DEFAULT_BLOCKED,
        max_bytes: int = 5 * 1024 * 1024,
    ) -> None:
        self.pool = pool
        self.egress = egress
        self.user_agent = user_agent
        self.timeout_seconds = timeout_seconds
        self.blocked = frozenset(blocked)
        self.max_bytes = max_bytes
        self.blocked_requests = 0
        self.rendered = 0
        self._context: BrowserContext | None = None

    async def open(self) -> None:
        await self.egress.start()
        self._context = await self.pool.context(self.egress, self.user_agent)

    async def close(self) -> None:
        if self._context is not None:
            with contextlib.suppress(PlaywrightError):
                await self._context.close()
        await self.egress.close()

    async def render(self, fetched: Response) -> Response:
        """The document as the browser leaves it once its scripts have run."""
        assert self._context is not None
        async with self.pool.slots:
            page = await self._context.new_page()
            navigations: list[str] = []
            served = False

            async def route(route: Route) -> None:
                nonlocal served
                request = route.request
                if request.resource_type in self.blocked:
                    self.blocked_requests += 1
                    await route.abort("blockedbyclient")
                elif not served and request.is_navigation_request() and request.url == fetched.url:
                    # The document the engine fetched, under the HTTP crawler's rules.
                    served = True
                    await route.fulfill(
                        status=fetched.status,
                        content_type=fetched.content_type or "text/html",
                        body=fetched.body,
                    )
                else:
                    await route.continue_()

            def on_request(request: Request) -> None:
                if request.is_navigation_request() and request.frame == page.main_frame:
                    navigations.append(request.url)

            page.on("request", on_request)
            await page.route("**/*", route)
            deadline = time.monotonic() + self.timeout_seconds
            try:
                await page.goto(fetched.url, wait_until="load", timeout=_ms(deadline))
                with contextlib.suppress(PlaywrightTimeout):
                    # Still busy at the limit: the page as it is then.
                    await page.wait_for_load_state(SETTLE, timeout=_ms(deadline))
                html = await page.content()
                landed = page.url
            except PlaywrightTimeout:
                self._refused_navigation(navigations)
                raise TimeoutError(
                    f"the page did not load within {self.timeout_seconds:g} s"
                ) from None
            except PlaywrightError as exc:
                self._refused_navigation(navigations)
                raise BrowserPageFailed(str(exc).splitlines()[0][:300]) from None
            finally:
                with contextlib.suppress(PlaywrightError):
                    await page.close()
        self._refused_navigation(navigations)
        if landed.startswith("chrome-error:"):
            raise BrowserPageFailed(f"the page navigated to an error ({landed})")
        self.rendered += 1
        body = html.encode("utf-8", "replace")[: self.max_bytes]
        return replace(fetched, body=body, charset="utf-8", content_type="text/html")

    def stats(self) -> dict[str, int]:
        """What the run's browser did, for its log."""
        return {
            "pages_rendered": self.rendered,
            "browser_requests": self.egress.requests,
            "browser_bytes": self.egress.bytes,
            "blocked_requests": self.blocked_requests,
            "refused_requests": len(self.egress.refused),
        }

    def _refused_navigation(self, navigations: list[str]) -> None:
        """A navigation of the page (a script's, a meta refresh's, a redirect's) that the
        egress proxy refused fails the page as the policy's refusal."""
        for url in navigations:
            reason = self.egress.refused.get(url) or self.egress.refused.get(_tunnel_key(url))
            if reason is not None:
                raise AddressRefused(f"the page navigated to {url[:200]}: {reason}")


def _tunnel_key(url: str) -> str:
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme in {"https", "wss"} else 80)
    host = parts.hostname or ""
    return f"https://{f'[{host}]' if ':' in host else host}:{port}/"


def _ms(deadline: float) -> float:
    return max(deadline - time.monotonic(), 0.001) * 1000
