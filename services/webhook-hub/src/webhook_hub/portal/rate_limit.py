"""The subscription page's rate-limit editor (issue 32): the form read from its text fields,
and what the page shows of the limit."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError
from servicekit.errors import ServiceError

from webhook_hub.delivery_engine.rate_limit import effective_burst
from webhook_hub.models import Subscription

# The page counts held deliveries up to this many ("10,000 or more").
HELD_CAP = 10_000
FIELDS = ("rate_limit_per_second", "rate_limit_burst")
_SENTENCES = {
    "rate_limit_per_second": "Enter a number of deliveries per second above 0 and at most "
    "10,000, or leave it empty for no limit.",
    "rate_limit_burst": "Enter a whole number from 1 to 100,000, or leave it empty for the "
    "default (one second's worth).",
}


@dataclass
class RateLimitForm:
    """The two fields as typed (text), so a refused form shows them again as they were."""

    rate_limit_per_second: str = ""
    rate_limit_burst: str = ""

    @classmethod
    def of(cls, subscription: Subscription) -> RateLimitForm:
        rate, burst = subscription.rate_limit_per_second, subscription.rate_limit_burst
        return cls("" if rate is None else f"{rate:g}", "" if burst is None else str(burst))

    @classmethod
    def read(cls, form: Mapping[str, Any]) -> RateLimitForm:
        """Any form in: each field's text, trimmed and bounded (a non-text value is empty)."""

        def text(name: str) -> str:
            value = form.get(name)
            return value.strip()[:40] if isinstance(value, str) else ""

        return cls(text("rate_limit_per_second"), text("rate_limit_burst"))

    def patch(self) -> dict[str, str | None]:
        """The PATCH it stands for: both fields always (an empty rate removes the limit, an
        empty burst is the default), validated by the API's own model."""
        return {
            "rate_limit_per_second": self.rate_limit_per_second or None,
            "rate_limit_burst": self.rate_limit_burst or None,
        }


def form_errors(exc: ValidationError | ServiceError) -> dict[str, str]:
    """Field name -> a sentence saying what to enter there."""
    if isinstance(exc, ServiceError):
        details = exc.extra.get("details") if exc.extra else None
        named = [str(d["loc"][-1]) for d in details or () if d.get("loc")]
        return {name: _SENTENCES.get(name, exc.message) for name in named} or {"form": exc.message}
    errors: dict[str, str] = {}
    for error in exc.errors():
        name = str(error["loc"][0]) if error["loc"] else "form"
        errors.setdefault(name, _SENTENCES.get(name, str(error["msg"])))
    return errors


@dataclass
class RateLimitView:
    """What the subscription page shows: the limit in words, how many deliveries wait for
    it, and the editor's values and errors."""

    limited: bool
    summary: str
    held: int | None
    held_cap: int = HELD_CAP
    form: RateLimitForm = field(default_factory=RateLimitForm)
    errors: dict[str, str] = field(default_factory=dict)


def rate_limit_view(
    subscription: Subscription,
    held: int | None,
    form: RateLimitForm | None = None,
    errors: dict[str, str] | None = None,
) -> RateLimitView:
    rate = subscription.rate_limit_per_second
    if rate is None:
        summary = "None: deliveries go out as fast as the endpoint answers"
    else:
        burst = effective_burst(rate, subscription.rate_limit_burst)
        summary = f"{rate:g} per second, bursts of up to {burst}"
        if subscription.rate_limit_burst is None:
            summary += " (the default: one second's worth)"
    return RateLimitView(
        limited=rate is not None,
        summary=summary,
        held=held,
        form=form or RateLimitForm.of(subscription),
        errors=errors or {},
    )
