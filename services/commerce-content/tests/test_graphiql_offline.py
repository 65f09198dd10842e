"""GraphiQL and the API docs render in a real Chromium with the network limited to 127.0.0.1:
every asset is vendored, nothing comes from a CDN."""

from __future__ import annotations

import base64
from pathlib import Path

import httpx
from commerce_content.graphql_api.ide import SAMPLE_QUERY
from commerce_content.graphql_api.schema import build_schema
from commerce_content.settings import Settings
from fastapi import FastAPI
from graphql import parse, validate
from servicekit.testing.browser import (
    BrowserPage,
    axe_violations,
    describe_violations,
    screenshots,
)
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.factories import bearer_for, make_product, make_user
from tests.graphql_client import global_id
from tests.test_graphql_orders import create_order
from tests.test_graphql_subscriptions import relay_events
from tests.test_orders import completed_event, notify, order_row

# Committed, shown in the README.
DOCS_SCREENSHOTS = Path(__file__).resolve().parents[1] / "docs" / "screenshots"


async def test_graphiql_renders_offline_and_runs_a_query(
    browser_page: BrowserPage, graphql_url: str, screenshot_dir: Path
) -> None:
    page = browser_page.page
    await page.goto(graphql_url)
    editor = page.locator(".graphiql-query-editor .CodeMirror")
    # Typed over the sample query once the page has settled: it is there, and the Explorer
    # has read the schema.
    await page.locator(".graphiql-query-editor", has_text="products(page: { first: 5 })").wait_for()
    await page.locator(".graphiql-explorer-root", has_text="products").wait_for()
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


async def test_graphiql_runs_a_subscription_over_the_websocket(
    browser_page: BrowserPage,
    graphql_app: FastAPI,
    graphql_url: str,
    screenshot_dir: Path,
    service_settings: Settings,
    db_engine: AsyncEngine,
) -> None:
    """The vendored GraphiQL's own graphql-ws client: the headers editor's Authorization goes
    in connection_init, the order arrives PENDING, then PAID after a signed notification."""
    await graphql_app.state.graphql_subscriptions.broker.following.wait()
    manager = await make_user(db_engine, "manager")
    headers = bearer_for(service_settings, manager, "manager")
    product = await make_product(db_engine, price="5.00", stock=5)
    created = await create_order(
        graphql_url, headers, [{"productId": global_id("Product", product), "quantity": 1}]
    )
    order_gid = created["order"]["id"]
    page = browser_page.page
    await page.goto(graphql_url)
    editor = page.locator(".graphiql-query-editor .CodeMirror")
    # Typed over the sample query once the page has settled: it is there, and the Explorer
    # has read the schema.
    await page.locator(".graphiql-query-editor", has_text="products(page: { first: 5 })").wait_for()
    await page.locator(".graphiql-explorer-root", has_text="products").wait_for()
    await editor.click()
    await page.keyboard.press("Control+A")
    await page.keyboard.type(
        f'subscription {{ orderStatusChanged(orderId: "{order_gid}") {{ status ',
    )
    await page.get_by_role("button", name="Headers").click()
    headers_editor = page.locator(".graphiql-editor-tool .CodeMirror").last
    await headers_editor.click()
    await page.keyboard.type(f'{{"Authorization": "{headers["Authorization"]}"')
    await page.locator(".graphiql-execute-button").click()
    await page.locator(".graphiql-response", has_text='"PENDING"').wait_for()
    row = await order_row(db_engine, _order_key(order_gid))
    async with httpx.AsyncClient(base_url=graphql_url.removesuffix("/graphql")) as http:
        answer = await notify(http, service_settings, completed_event(row))
    assert answer.status_code == 200, answer.text
    await relay_events(service_settings, db_engine)
    await page.locator(".graphiql-response", has_text='"PAID"').wait_for()
    await screenshots(page, screenshot_dir, "commerce-graphiql-subscription")
    assert browser_page.blocked_requests == []
    assert browser_page.csp_violations == []
    assert browser_page.page_errors == []


def _order_key(order_gid: str) -> str:
    padded = order_gid + "=" * (-len(order_gid) % 4)
    return base64.urlsafe_b64decode(padded).decode().removeprefix("Order:")


def test_the_sample_query_is_valid_against_the_schema(service_settings: Settings) -> None:
    schema = build_schema(service_settings)._schema
    assert validate(schema, parse(SAMPLE_QUERY)) == []


async def test_graphiql_opens_with_the_explorer_the_sample_query_and_a_signed_in_developer(
    browser_page: BrowserPage, graphql_url: str, service_settings: Settings, db_engine: AsyncEngine
) -> None:
    """`/graphql#token=<JWT>`: the headers editor holds the developer's Authorization, the
    sample query runs as them (`viewer` is their user), the token leaves the address bar;
    the Explorer lists the schema's fields beside the editor."""
    developer = await make_user(db_engine, "manager", name="Grace Developer")
    token = bearer_for(service_settings, developer, "manager")["Authorization"].split()[1]
    page = browser_page.page
    await page.set_viewport_size({"width": 1280, "height": 900})
    await page.goto(f"{graphql_url}#token={token}")
    await page.locator(".graphiql-query-editor", has_text="products(page: { first: 5 })").wait_for()
    # The Explorer's own tree, built from the introspected schema.
    await page.locator(".graphiql-explorer-root", has_text="products").wait_for()
    assert "token" not in page.url
    await page.get_by_role("button", name="Headers").click()
    await page.locator(".graphiql-editor-tool", has_text=f"Bearer {token}").wait_for()
    # Read from the answer itself: the response editor draws only its visible lines, and
    # `viewer` comes after the products (below the fold when their names are long).
    async with page.expect_response(
        lambda response: response.url == graphql_url and response.request.method == "POST"
    ) as answered:
        await page.locator(".graphiql-execute-button").click()
    answer = await (await answered.value).json()
    assert answer["data"]["viewer"]["name"] == "Grace Developer"
    await page.locator(".graphiql-response", has_text='"totalCount"').wait_for()
    for scheme in ("light", "dark"):
        await page.emulate_media(color_scheme=scheme)
        for width in (1280, 390):
            await page.set_viewport_size({"width": width, "height": 900})
            violations = await axe_violations(page)
            assert violations == [], f"{scheme} {width}: {describe_violations(violations)}"
        suffix = "" if scheme == "light" else "-dark"
        await screenshots(page, DOCS_SCREENSHOTS, f"graphiql-explorer{suffix}")
    assert browser_page.blocked_requests == []
    assert browser_page.csp_violations == []
    assert browser_page.page_errors == []
