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
)


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


def read_form(data: Mapping[str, Any]) -> ScraperForm:
    values = {name: str(data.get(name, "") or "").strip() for name in FORM_FIELDS}
    form = ScraperForm(values)
    headers, header_error = parse_headers(values["headers"])
    if header_error:
        form.errors["headers"] = header_error
    body: dict[str, Any] = {
        "name": values["name"],
        "url": values["url"],
        "schedule": values["schedule"] or None,
        "timezone": values["timezone"] or "UTC",
        "proxy_pool": values["proxy_pool"] or None,
        "headers": headers,
    }
    for number in ("rate_limit", "max_pages"):
        if values[number]:
            body[number] = values[number]
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
