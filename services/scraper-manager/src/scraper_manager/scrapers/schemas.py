"""Wire shapes of scrapers; the configuration is validated here, once."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any, Literal
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadDateError, croniter
from parsel import Selector
from pydantic import BaseModel, ConfigDict, Field, field_validator
from servicekit.net import refused_header

from scraper_manager.crawler.patterns import compile_pattern
from scraper_manager.models import ScraperStatus

Render = Literal["http", "browser"]
_HEADER_NAME = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,128}$")
_PROBE = Selector(text="<html><body></body></html>")


def check_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        raise ValueError("url must be an absolute http or https URL")
    try:
        port = parts.port  # ValueError past 65535 or not a number
    except ValueError:
        port = 0
    if port == 0:
        # Port 0 names no service (a URL library would quietly send it to 80).
        raise ValueError("url has an invalid port (1 to 65535)")
    return url


def check_schedule(value: str | None) -> str | None:
    if value is None:
        return None
    if not croniter.is_valid(value):
        raise ValueError(f"schedule {value!r} is not a valid cron expression")
    try:
        # croniter looks decades ahead: leap days pass, 31 February never comes.
        croniter(value, datetime.now(UTC)).get_next(datetime)
    except CroniterBadDateError:
        raise ValueError(f"schedule {value!r} never fires") from None
    return value


def check_timezone(value: str) -> str:
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(f"unknown timezone {value!r}") from exc
    return value


def check_headers(headers: dict[str, str]) -> dict[str, str]:
    if len(headers) > 50:
        raise ValueError("at most 50 headers")
    for name, value in headers.items():
        if not _HEADER_NAME.match(name):
            raise ValueError(f"header name {name!r} is not a valid HTTP token")
        refused = refused_header(name)
        if refused is not None:
            raise ValueError(refused)
        if len(value) > 4096 or any(ch in value for ch in "\r\n\x00"):
            raise ValueError(f"header {name!r} has an invalid value")
    return headers


def check_expression(expression: str) -> str:
    """A CSS selector, or XPath when it starts with `/` or `(`; parsel must accept it."""
    try:
        if expression.startswith(("/", "(")):
            _PROBE.xpath(expression)
        else:
            _PROBE.css(expression)
    except Exception as exc:
        raise ValueError(f"{expression!r} is not a valid CSS or XPath expression") from exc
    return expression


def check_follow(value: str | None) -> str | None:
    """CSS/XPath of links, or `re:<pattern>` in the syntax RE2 runs in linear time."""
    if value is None:
        return None
    if value.startswith("re:"):
        compile_pattern(value[3:])
        return value
    return check_expression(value)


def check_selectors(selectors: dict[str, str]) -> dict[str, str]:
    if len(selectors) > 100:
        raise ValueError("at most 100 selectors")
    for field, expression in selectors.items():
        if not 1 <= len(field) <= 100:
            raise ValueError("selector names are 1 to 100 characters")
        check_expression(expression)
    return selectors


# The fields of a page item when a scraper has no selectors.
DEFAULT_ITEM_FIELDS = ("url", "status", "title", "description")


def item_fields(selectors: dict[str, str]) -> list[str]:
    """The fields every item of a scraper with these selectors has: `url` and the selectors'
    names, or the page item's fields without selectors."""
    if not selectors:
        return list(DEFAULT_ITEM_FIELDS)
    return ["url", *[name for name in selectors if name != "url"]]


def item_key_refusal(item_key: str | None, selectors: dict[str, str]) -> str | None:
    """Why `item_key` cannot identify this scraper's items (None: it can, or it is unset)."""
    if item_key is None:
        return None
    fields = item_fields(selectors)
    if item_key in fields:
        return None
    return f"item_key {item_key!r} is not one of the scraper's fields ({', '.join(fields)})"


CREATE_EXAMPLE: dict[str, Any] = {
    "name": "catalog",
    "url": "https://shop.example/catalog",
    "schedule": "0 6 * * *",
    "timezone": "Europe/Oslo",
    "rate_limit": 2,
    "headers": {"Accept-Language": "en"},
    "max_pages": 200,
    "follow": "a.next, a.product",
    "item_selector": "div.product",
    "selectors": {"name": "h2::text", "price": "span.price::text", "link": "a::attr(href)"},
}
SCRAPER_EXAMPLE: dict[str, Any] = {
    "id": 4,
    **CREATE_EXAMPLE,
    "proxy_pool": None,
    "max_depth": None,
    "obey_robots": True,
    "concurrency": 4,
    "timeout_seconds": 30,
    "keep_runs": None,
    "item_key": None,
    "revalidate": True,
    "render": "http",
    "status": "completed",
    "next_run_at": "2026-11-23T05:00:00Z",
    "created_at": "2026-11-22T09:00:00Z",
    "updated_at": "2026-11-22T09:00:00Z",
}


class ScraperFields(BaseModel):
    """The configuration's fields; `ScraperConfig` validates them on the way in. Output does
    not validate again: a scraper stored under older rules is still shown."""

    name: str = Field(min_length=1, max_length=200)
    url: str = Field(max_length=2048, examples=["https://example.com/catalog"])
    schedule: str | None = Field(default=None, max_length=200, examples=["*/15 * * * *"])
    timezone: str = Field(default="UTC", max_length=64)
    proxy_pool: str | None = Field(default=None, max_length=100)
    rate_limit: int = Field(default=5, ge=1, le=100, description="requests per second")
    headers: dict[str, str] = Field(default_factory=dict)
    max_pages: int = Field(default=100, ge=1, le=10_000)
    max_depth: int | None = Field(default=None, ge=0, le=100)
    follow: str | None = Field(
        default=None,
        max_length=500,
        description="CSS/XPath of links to follow, or a URL regex prefixed with 're:'",
    )
    selectors: dict[str, str] = Field(default_factory=dict)
    item_selector: str | None = Field(default=None, max_length=500)
    obey_robots: bool = True
    concurrency: int = Field(default=4, ge=1, le=32)
    timeout_seconds: int = Field(default=30, ge=1, le=120)
    keep_runs: int | None = Field(
        default=None,
        ge=1,
        le=10_000,
        description=(
            "Keep only this many latest finished runs, with their results and logs (the "
            "latest run is always kept); null: runs are kept for the service's retention days"
        ),
    )
    item_key: str | None = Field(
        default=None,
        min_length=1,
        max_length=100,
        description=(
            "The field that identifies an item across runs (a selector's name, or `url`): each "
            "successful run is compared with the previous one (added, removed, changed); "
            "null: runs are not compared"
        ),
    )
    revalidate: bool = Field(
        default=True,
        description=(
            "Send the validators the last run saw (If-None-Match, If-Modified-Since); a page "
            "answered 304 reuses its stored items and links"
        ),
    )
    render: Render = Field(
        default="http",
        description=(
            "`http`: pages are parsed as fetched; `browser`: each page is rendered by headless "
            "Chromium (its scripts run, XHR included) before it is parsed; slower, for pages "
            "built by JavaScript. Browser pages are not revalidated"
        ),
    )


class ScraperConfig(ScraperFields):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [CREATE_EXAMPLE]})

    _url = field_validator("url")(check_url)
    _schedule = field_validator("schedule")(check_schedule)
    _timezone = field_validator("timezone")(check_timezone)
    _headers = field_validator("headers")(check_headers)
    _selectors = field_validator("selectors")(check_selectors)

    @field_validator("item_selector")
    @classmethod
    def _item(cls, value: str | None) -> str | None:
        return None if value is None else check_expression(value)

    _follow = field_validator("follow")(check_follow)


class ScraperPatch(BaseModel):
    """Only the fields given change; validated as on creation."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"rate_limit": 1, "schedule": None}]},
    )

    name: str | None = Field(default=None, min_length=1, max_length=200)
    url: str | None = Field(default=None, max_length=2048)
    schedule: str | None = Field(default=None, max_length=200)
    timezone: str | None = Field(default=None, max_length=64)
    proxy_pool: str | None = Field(default=None, max_length=100)
    rate_limit: int | None = Field(default=None, ge=1, le=100)
    headers: dict[str, str] | None = None
    max_pages: int | None = Field(default=None, ge=1, le=10_000)
    max_depth: int | None = Field(default=None, ge=0, le=100)
    follow: str | None = Field(default=None, max_length=500)
    selectors: dict[str, str] | None = None
    item_selector: str | None = Field(default=None, max_length=500)
    obey_robots: bool | None = None
    concurrency: int | None = Field(default=None, ge=1, le=32)
    timeout_seconds: int | None = Field(default=None, ge=1, le=120)
    keep_runs: int | None = Field(default=None, ge=1, le=10_000)
    item_key: str | None = Field(default=None, min_length=1, max_length=100)
    revalidate: bool | None = None
    render: Render | None = None

    @field_validator("url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        return None if value is None else check_url(value)

    _schedule = field_validator("schedule")(check_schedule)
    _follow = field_validator("follow")(check_follow)

    @field_validator("timezone")
    @classmethod
    def _timezone(cls, value: str | None) -> str | None:
        return None if value is None else check_timezone(value)

    @field_validator("headers")
    @classmethod
    def _headers(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        return None if value is None else check_headers(value)

    @field_validator("selectors")
    @classmethod
    def _selectors(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        return None if value is None else check_selectors(value)

    @field_validator("item_selector")
    @classmethod
    def _item(cls, value: str | None) -> str | None:
        return None if value is None else check_expression(value)


class ScraperOut(ScraperFields):
    model_config = ConfigDict(extra="ignore", json_schema_extra={"examples": [SCRAPER_EXAMPLE]})

    id: int
    status: ScraperStatus
    next_run_at: datetime | None
    created_at: datetime
    updated_at: datetime


class ScraperList(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={"examples": [{"data": [SCRAPER_EXAMPLE], "next_cursor": "4"}]}
    )

    data: list[ScraperOut]
    next_cursor: str | None


class StatusView(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "id": 4,
                    "status": "running",
                    "last_run": "2026-11-22T10:00:00Z",
                    "items_count": 120,
                }
            ]
        }
    )

    id: int
    status: ScraperStatus
    last_run: datetime | None
    items_count: int


class RunStarted(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [{"run_id": 17, "status": "started"}]})

    run_id: int
    status: Literal["started"]


class RunStopping(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={"examples": [{"run_id": 17, "status": "stopping"}]}
    )

    run_id: int
    status: Literal["stopping", "stopped"]
