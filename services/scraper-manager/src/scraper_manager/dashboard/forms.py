"""The scraper form: text fields in, the API's `ScraperConfig` out, or the API's validation
messages keyed by field (shown at the field)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from scraper_manager.scrapers.schemas import ScraperConfig
from scraper_manager.scrapers.service import next_fire

FORM_FIELDS = (
    "name",
    "url",
    "schedule",
    "timezone",
    "proxy_pool",
    "rate_limit",
    "max_pages",
    "headers",
    "item_selector",
    "selectors",
    "follow",
    "max_depth",
    "obey_robots",
    "concurrency",
    "timeout_seconds",
    "keep_runs",
    "render",
    "item_key",
    "revalidate",
)
# The fields' names as the form labels them (the error summary links each to its field).
LABELS = {
    "name": "Name",
    "url": "Start URL",
    "schedule": "Schedule",
    "timezone": "Timezone",
    "proxy_pool": "Proxy pool",
    "rate_limit": "Rate limit",
    "max_pages": "Max pages",
    "headers": "Headers",
    "item_selector": "Item selector",
    "selectors": "Fields",
    "follow": "Links to follow",
    "max_depth": "Max depth",
    "obey_robots": "Obey robots.txt",
    "concurrency": "Concurrency",
    "timeout_seconds": "Timeout",
    "keep_runs": "Runs kept",
    "render": "Rendering",
    "item_key": "Item key",
    "revalidate": "Revalidate pages",
}
# Empty means the API's default (a number left out) or none (a nullable field).
_NUMBERS = ("rate_limit", "max_pages", "concurrency", "timeout_seconds")
_OPTIONAL_NUMBERS = ("max_depth", "keep_runs")
_OPTIONAL_TEXT = ("schedule", "proxy_pool", "item_selector", "follow", "item_key")


@dataclass
class ScraperForm:
    values: dict[str, str]
    errors: dict[str, str] = field(default_factory=dict)
    config: ScraperConfig | None = None


def parse_headers(text: str) -> tuple[dict[str, str], str | None]:
    """`Name: value` per line."""
    headers: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        name, colon, value = line.partition(":")
        if not colon or not name.strip():
            return {}, f"Line {number}: write each header as Name: value"
        headers[name.strip()] = value.strip()
    return headers, None


def parse_selectors(text: str) -> tuple[dict[str, str], str | None]:
    """`name: expression` per line; the name ends at the first colon, so an expression keeps
    its own (`price: span.price::text`)."""
    selectors: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        name, colon, expression = line.partition(":")
        if not colon or not name.strip() or not expression.strip():
            return {}, f"Line {number}: write each field as name: CSS or XPath"
        if name.strip() in selectors:
            return {}, f"Line {number}: the field {name.strip()!r} is named twice"
        selectors[name.strip()] = expression.strip()
    return selectors, None


def form_values(scraper: Any) -> dict[str, str]:
    """A stored scraper as the form's text fields."""

    def text(value: Any) -> str:
        return "" if value is None else str(value)

    return {
        "name": scraper.name,
        "url": scraper.url,
        "schedule": text(scraper.schedule),
        "timezone": scraper.timezone,
        "proxy_pool": text(scraper.proxy_pool),
        "rate_limit": str(scraper.rate_limit),
        "max_pages": str(scraper.max_pages),
        "headers": "\n".join(f"{k}: {v}" for k, v in scraper.headers.items()),
        "item_selector": text(scraper.item_selector),
        "selectors": "\n".join(f"{k}: {v}" for k, v in scraper.selectors.items()),
        "follow": text(scraper.follow),
        "max_depth": text(scraper.max_depth),
        "obey_robots": "on" if scraper.obey_robots else "",
        "concurrency": str(scraper.concurrency),
        "timeout_seconds": str(scraper.timeout_seconds),
        "keep_runs": text(scraper.keep_runs),
        "render": scraper.render,
        "item_key": text(scraper.item_key),
        "revalidate": "on" if scraper.revalidate else "",
    }


NEW_FORM = dict.fromkeys(FORM_FIELDS, "") | {
    "timezone": "UTC",
    "obey_robots": "on",
    "render": "http",
    "revalidate": "on",
}


def read_form(data: Mapping[str, Any]) -> ScraperForm:
    # A text field's surrounding spaces are never meant; a textarea's lines are trimmed
    # one by one when parsed.
    values = {name: str(data.get(name, "") or "").strip() for name in FORM_FIELDS}
    form = ScraperForm(values)
    headers, header_error = parse_headers(values["headers"])
    if header_error:
        form.errors["headers"] = header_error
    selectors, selector_error = parse_selectors(values["selectors"])
    if selector_error:
        form.errors["selectors"] = selector_error
    body: dict[str, Any] = {
        "name": values["name"],
        "url": values["url"],
        "timezone": values["timezone"] or "UTC",
        "headers": headers,
        "selectors": selectors,
        # An unticked checkbox sends nothing.
        "obey_robots": bool(values["obey_robots"]),
        # The API's default when the form sends none; any other value is the API's error.
        "render": values["render"] or "http",
        "revalidate": bool(values["revalidate"]),
    }
    for name in _OPTIONAL_TEXT:
        body[name] = values[name] or None
    for name in _NUMBERS:
        if values[name]:
            body[name] = values[name]
    for name in _OPTIONAL_NUMBERS:
        body[name] = values[name] or None
    try:
        form.config = ScraperConfig.model_validate(body)
    except ValidationError as exc:
        for error in exc.errors():
            where = str(error["loc"][0]) if error["loc"] else "name"
            form.errors.setdefault(where, str(error["msg"]).removeprefix("Value error, "))
    if form.errors:
        form.config = None
    return form


def preview_firings(
    schedule: str, timezone: str, now: datetime, count: int = 3
) -> tuple[list[datetime], str | None]:
    """The next `count` firing times of a cron expression in `timezone`, or the API's error."""
    try:
        checked = ScraperConfig.model_validate(
            {
                "name": "preview",
                "url": "https://example.com/",
                "schedule": schedule,
                "timezone": timezone or "UTC",
            }
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        return [], str(first["msg"]).removeprefix("Value error, ")
    assert checked.schedule is not None
    firings: list[datetime] = []
    moment = now
    for _ in range(count):
        due = next_fire(checked.schedule, checked.timezone, moment)
        if due is None:
            break
        firings.append(due)
        moment = due
    return firings, None
