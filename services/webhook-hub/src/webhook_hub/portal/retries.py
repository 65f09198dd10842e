"""The portal's editor of retry schedules and timeouts (issue 32): an endpoint's, on its page
(and on a page of its own, where a refused form comes back), and the owner's defaults.

The form is read into the API's own bodies (`SubscriptionUpdate`, `DeliveryDefaults`), so the
portal and the API refuse the same things with the same words; each refused wait is told at
its own row."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.datastructures import FormData

from webhook_hub.models import Subscription
from webhook_hub.subscriptions.retry_settings import (
    MAX_RETRIES,
    InEffect,
    Source,
    format_duration,
    in_effect,
    schedule_text,
)
from webhook_hub.subscriptions.service import SubscriptionService

# Empty rows offered below the waits typed, and the fewest rows shown.
SPARE_ROWS = 3
FEWEST_ROWS = 5
_SOURCES = {
    Source.SUBSCRIPTION: "set on this endpoint",
    Source.OWNER_DEFAULT: "from your defaults",
    Source.SERVICE_DEFAULT: "service default",
}
# pydantic's "Value error, " prefix says nothing to a person filling a form.
_PREFIX = "Value error, "

Body = TypeVar("Body", bound=BaseModel)


@dataclass
class RetryForm:
    """What the person typed, as text (a refused form comes back as it was sent): whether the
    schedule is set here (`own_schedule`) and its waits, row by row, empty rows included."""

    own_schedule: bool = False
    waits: list[str] = field(default_factory=list)
    timeout_seconds: str = ""

    @classmethod
    def of(cls, schedule: list[int] | None, timeout: int | None) -> RetryForm:
        return cls(schedule is not None, schedule_text(schedule) or [], _text(timeout))

    @classmethod
    def read(cls, form: FormData) -> RetryForm:
        return cls(
            own_schedule=form.get("schedule") == "own",
            waits=[str(v).strip() for v in form.getlist("wait")][: MAX_RETRIES * 2],
            timeout_seconds=str(form.get("timeout_seconds", "")).strip(),
        )

    def body(self) -> dict[str, Any]:
        """The API's body: empty rows skipped; an empty timeout is not set."""
        return {
            "retry_schedule": self._filled() if self.own_schedule else None,
            "timeout_seconds": self.timeout_seconds or None,
        }

    def contradiction(self) -> dict[str, str]:
        """Waits typed while "use the defaults" is chosen: told, rather than dropped."""
        if not self.own_schedule and self._filled():
            return {
                "retry_schedule": "Choose “Set these waits” to use the waits typed, or empty them."
            }
        return {}

    def parsed(self, model: type[Body]) -> tuple[Body | None, dict[str, str]]:
        """The form read into `model` (the API's body: `SubscriptionUpdate`, `DeliveryDefaults`),
        or None and what is wrong with it, each at its input."""
        try:
            body = model.model_validate(self.body())
        except ValidationError as exc:
            return None, self.errors(exc)
        errors = self.contradiction()
        return (None if errors else body), errors

    def rows(self) -> list[str]:
        """The rows to show: those typed, then spare empty ones, up to the most allowed."""
        typed = list(self.waits)
        while typed and not typed[-1]:
            typed.pop()
        count = min(max(len(typed) + SPARE_ROWS, FEWEST_ROWS), max(MAX_RETRIES, len(typed)))
        return typed + [""] * (count - len(typed))

    def errors(self, exc: ValidationError) -> dict[str, str]:
        """Field -> message: `wait-<row>` (from 1, as the rows are labelled) for one wait,
        `retry_schedule` for the whole schedule, `timeout_seconds`, `form` for the rest."""
        rows = [i for i, wait in enumerate(self.waits) if wait]
        errors: dict[str, str] = {}
        for error in exc.errors():
            loc = error["loc"]
            message = str(error["msg"]).removeprefix(_PREFIX)
            message = message[:1].upper() + message[1:]
            if loc[:1] == ("retry_schedule",) and len(loc) > 1 and isinstance(loc[1], int):
                name = f"wait-{rows[loc[1]] + 1}" if loc[1] < len(rows) else "retry_schedule"
            elif loc[:1] in (("retry_schedule",), ("timeout_seconds",)):
                name = str(loc[0])
            else:
                name = "form"
            errors.setdefault(name, message)
        return errors

    def _filled(self) -> list[str]:
        return [wait for wait in self.waits if wait]


def _text(value: int | None) -> str:
    return "" if value is None else str(value)


def in_effect_view(effect: InEffect) -> dict[str, Any]:
    """What the page says of the values in effect."""
    schedule = [format_duration(s) for s in effect.retry_schedule]
    return {
        "schedule": schedule,
        "schedule_from": _SOURCES[effect.retry_schedule_from],
        "schedule_source": effect.retry_schedule_from.value,
        "attempts": len(schedule) + 1,
        "total": _spread(sum(effect.retry_schedule)),
        "timeout": effect.timeout_seconds,
        "timeout_from": _SOURCES[effect.timeout_seconds_from],
        "timeout_source": effect.timeout_seconds_from.value,
    }


def _spread(seconds: float) -> str:
    """A span as people read it: "1d 3h 35m", "45s"."""
    whole = int(seconds)
    if whole != seconds:
        return f"{seconds:g}s"
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        count, whole = divmod(whole, size)
        if count:
            parts.append(f"{count}{unit}")
    return " ".join(parts) or "0s"


async def endpoint_retries(
    service: SubscriptionService,
    owner: str,
    subscription: Subscription,
    *,
    form: RetryForm | None = None,
    errors: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The editor's context on an endpoint's page (`portal/subscription_retries.html`)."""
    owner_schedule, owner_timeout, _ = await service.defaults(owner)
    effect = in_effect(
        subscription.retry_schedule,
        subscription.timeout_seconds,
        owner_schedule,
        owner_timeout,
        service.settings.retry_schedule_seconds,
        service.settings.delivery_timeout_seconds,
    )
    return {
        "action": f"/portal/endpoints/{subscription.id}/retries",
        "effect": in_effect_view(effect),
        "form": form or RetryForm.of(subscription.retry_schedule, subscription.timeout_seconds),
        "errors": errors or {},
        "follow_label": "Use the service default"
        if owner_schedule is None
        else "Use your defaults",
        "timeout_hint": "the service default" if owner_timeout is None else "your default",
    }


async def defaults_editor(
    service: SubscriptionService,
    owner: str,
    *,
    form: RetryForm | None = None,
    errors: dict[str, str] | None = None,
) -> dict[str, Any]:
    schedule, timeout, effect = await service.defaults(owner)
    return {
        "action": "/portal/defaults",
        "effect": in_effect_view(effect),
        "form": form or RetryForm.of(schedule, timeout),
        "errors": errors or {},
        "follow_label": "Use the service default",
        "timeout_hint": "the service default",
    }
