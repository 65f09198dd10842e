"""GraphiQL and the API docs render in a real Chromium with the network limited to 127.0.0.1:
every asset is vendored, nothing comes from a CDN."""

from __future__ import annotations

from pathlib import Path

from servicekit.testing.browser import BrowserPage, screenshots


async def test_graphiql_renders_offline_and_runs_a_query(
    browser_page: BrowserPage, graphql_url: str, screenshot_dir: Path
) -> None:
    page = browser_page.page
    await page.goto(graphql_url)
    editor = page.locator(".graphiql-query-editor .CodeMirror")
    await editor.wait_for()
    await editor.click()
    await page.keyboard.press("Control+A")
    await page.keyboard.type("{ __typename ")
    await page.locator(".graphiql-execute-button").click()
    # The answer comes back from the service: the vendored fetcher works.
    await page.locator(".graphiql-response", has_text='"Query"').wait_for()
    await screenshots(page, screenshot_dir, "commerce-graphiql")
    assert browser_page.blocked_requests == []
    assert browser_page.csp_violations == []
    assert browser_page.page_errors == []


async def test_the_api_docs_render_offline(browser_page: BrowserPage, graphql_url: str) -> None:
    base = graphql_url.removesuffix("/graphql")
    await browser_page.page.goto(f"{base}/docs")
    await browser_page.page.locator(".swagger-ui .information-container").wait_for()
    await browser_page.page.goto(f"{base}/redoc")
    await browser_page.page.locator(".api-content h1").wait_for()
    assert browser_page.blocked_requests == []
