"""Browser tests with Playwright driving Debian's chromium (`apt-get install chromium`; `make
test` installs it): Playwright's own browser download cannot work offline. One browser per
test session, a fresh context (cookies, storage) per test, and the network limited to
127.0.0.1: every other request is aborted and recorded, so a test can assert none was made."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from playwright.async_api import Browser, ConsoleMessage, Page, Route, async_playwright

from servicekit.web.pages.assets import default_catalog

CHROMIUM = os.environ.get("SERVICEKIT_CHROMIUM", "/usr/bin/chromium")
# Headless is Playwright's own flag; it also gives the browser an empty profile directory
# (--user-data-dir) of its own for each launch.
CHROMIUM_ARGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
ALLOWED_HOSTS = frozenset({"127.0.0.1"})
WIDTHS = (1280, 390)
SERIOUS = ("serious", "critical")


@dataclass
class BrowserPage:
    """A page and what it tried: requests to other hosts, console errors, CSP violations."""

    page: Page
    blocked_requests: list[str] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)

    @property
    def csp_violations(self) -> list[str]:
        return [e for e in self.console_errors if "Content Security Policy" in e]


@pytest.fixture(scope="session")
async def browser() -> AsyncIterator[Browser]:
    if not os.path.exists(CHROMIUM):  # noqa: ASYNC240 (once a session)
        pytest.fail(f"{CHROMIUM} is missing: apt-get install -y chromium (make test does)")
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=list(CHROMIUM_ARGS)
        )
        yield launched
        await launched.close()


@pytest.fixture
async def browser_page(browser: Browser) -> AsyncIterator[BrowserPage]:
    context = await browser.new_context(viewport={"width": WIDTHS[0], "height": 900})
    page = await context.new_page()
    watched = BrowserPage(page)

    async def only_loopback(route: Route) -> None:
        url = route.request.url
        if urlsplit(url).hostname in ALLOWED_HOSTS:
            await route.continue_()
        else:
            watched.blocked_requests.append(url)
            await route.abort("blockedbyclient")

    def on_console(message: ConsoleMessage) -> None:
        if message.type == "error":
            watched.console_errors.append(message.text)

    await context.route("**/*", only_loopback)
    page.on("console", on_console)
    page.on("pageerror", lambda error: watched.page_errors.append(str(error)))
    yield watched
    await context.close()


async def axe_violations(page: Page, impacts: tuple[str, ...] = SERIOUS) -> list[dict[str, Any]]:
    """axe-core's violations of `impacts` on the page as it is now. The vendored axe.min.js is
    evaluated through the DevTools protocol, which the page's CSP does not govern."""
    source = default_catalog()["axe-core/axe.min.js"].file.read_text()
    await page.evaluate(f"{source}\n;undefined")
    violations: list[dict[str, Any]] = await page.evaluate(
        """async () => {
            const result = await axe.run(document, {resultTypes: ["violations"]});
            return result.violations.map(v => ({
                id: v.id, impact: v.impact, help: v.help,
                targets: v.nodes.map(n => n.target.join(" ")),
            }));
        }"""
    )
    return [v for v in violations if v["impact"] in impacts]


def describe_violations(violations: list[dict[str, Any]]) -> str:
    return "\n".join(f"{v['impact']} {v['id']}: {v['help']} at {v['targets']}" for v in violations)


@pytest.fixture(scope="session")
def screenshot_dir(pytestconfig: pytest.Config) -> Path:
    """`.data/screenshots/` under the directory pytest runs from (gitignored)."""
    folder = Path(
        os.environ.get("SCREENSHOT_DIR", pytestconfig.invocation_params.dir / ".data/screenshots")
    )
    folder.mkdir(parents=True, exist_ok=True)
    return folder


async def screenshots(page: Page, folder: Path, name: str) -> list[Path]:
    """Full-page PNGs of the page at 1280 px and 390 px wide: `<name>-1280.png`, `-390.png`."""
    saved = []
    original = page.viewport_size
    for width in WIDTHS:
        await page.set_viewport_size({"width": width, "height": 900})
        path = folder / f"{name}-{width}.png"
        await page.screenshot(path=str(path), full_page=True)
        saved.append(path)
    if original is not None:
        await page.set_viewport_size(original)
    return saved
