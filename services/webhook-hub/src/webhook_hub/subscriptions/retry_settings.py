"""Retry schedule and timeout of a subscription: parsing the waits people write ("5s", "1m",
"1h30m"), and which value is in effect (the subscription's, else its owner's default, else
the service's setting). Pure functions, no I/O."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TypeVar

# After the first attempt fails, one retry per entry (issue 32).
MAX_RETRIES = 20
MAX_TOTAL_SECONDS = 7 * 86400
# The timeout's bounds, as the API has always had them.
MIN_TIMEOUT_SECONDS = 1
MAX_TIMEOUT_SECONDS = 30

_UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
# One or more `<digits><unit>` parts, largest first or not ("1h30m", "90s"). The digits are
# bounded so that no text makes a number worth computing: 9 digits of days is already far
# past the 7-day total.
_DURATION = re.compile(r"(?:[0-9]{1,9}[dhms])+", re.ASCII)
_PART = re.compile(r"([0-9]{1,9})([dhms])", re.ASCII)
_MAX_CHARS = 40
_HOW = "use a number and a unit: 30s, 5m, 2h, 1d"


@dataclass(frozen=True, slots=True)
class DurationRefused:
    """Why a text is no duration (a sentence for people)."""

    reason: str


def parse_duration(text: object) -> int | DurationRefused:
    """Whole seconds from a duration such as `30s`, `5m`, `2h`, `1d` or `1h30m` (units
    s, m, h, d; case and surrounding spaces ignored), or why not. Total: anything in, a
    positive number of seconds or a refusal out."""
    if not isinstance(text, str):
        return DurationRefused(f"a wait is text ({_HOW}, in quotes)")
    value = text.strip().lower()
    if not value:
        return DurationRefused(f"empty ({_HOW})")
    if len(value) > _MAX_CHARS or not _DURATION.fullmatch(value):
        return DurationRefused(f"{text[:_MAX_CHARS]!r} is not a duration ({_HOW})")
    seconds = sum(int(count) * _UNITS[unit] for count, unit in _PART.findall(value))
    if seconds <= 0:
        return DurationRefused("a wait must be longer than 0s")
    return seconds


def format_duration(seconds: float) -> str:
    """The shortest text `parse_duration` reads as `seconds` (in the largest unit that divides
    it: 60 -> "1m", 90 -> "90s"); a fraction of a second (the service's setting allows one)
    in seconds ("0.5s")."""
    if seconds != int(seconds) or seconds <= 0:
        return f"{seconds:g}s"
    whole = int(seconds)
    for unit, size in _UNITS.items():
        if whole % size == 0:
            return f"{whole // size}{unit}"
    raise AssertionError("every whole number of seconds divides by 1")  # pragma: no cover


def check_wait(text: str) -> str:
    """One entry of a retry schedule, as pydantic's validator of it: its shortest text, or
    ValueError saying why it is refused."""
    parsed = parse_duration(text)
    if isinstance(parsed, DurationRefused):
        raise ValueError(parsed.reason)
    return format_duration(parsed)


def schedule_seconds(waits: Sequence[str]) -> list[int]:
    """The seconds of waits `check_wait` accepted."""
    return [_seconds_of(wait) for wait in waits]


def check_schedule(waits: list[str]) -> list[str]:
    """A whole schedule, each entry checked already: at most `MAX_RETRIES` waits, at most
    7 days in all. ValueError saying which bound it passes."""
    if len(waits) > MAX_RETRIES:
        raise ValueError(f"at most {MAX_RETRIES} retries; this schedule has {len(waits)}")
    total = sum(schedule_seconds(waits))
    if total > MAX_TOTAL_SECONDS:
        raise ValueError(
            f"the waits add up to {format_duration(total)}; at most 7 days ({MAX_TOTAL_SECONDS}s)"
        )
    return waits


def schedule_text(seconds: Sequence[float] | None) -> list[str] | None:
    """A stored schedule (seconds) as the API writes it."""
    return None if seconds is None else [format_duration(s) for s in seconds]


def _seconds_of(wait: str) -> int:
    parsed = parse_duration(wait)
    if isinstance(parsed, DurationRefused):
        raise ValueError(parsed.reason)
    return parsed


# --- which value is in effect ----------------------------------------------------------------


class Source(StrEnum):
    """Where a value in effect comes from."""

    SUBSCRIPTION = "subscription"
    OWNER_DEFAULT = "owner_default"
    SERVICE_DEFAULT = "service_default"


_T = TypeVar("_T")


def resolved(own: _T | None, owner_default: _T | None, service: _T) -> tuple[_T, Source]:
    """The subscription's value if it sets one, else its owner's default, else the
    service's. An empty schedule is a value (no retries), not "not set"."""
    if own is not None:
        return own, Source.SUBSCRIPTION
    if owner_default is not None:
        return owner_default, Source.OWNER_DEFAULT
    return service, Source.SERVICE_DEFAULT


@dataclass(frozen=True, slots=True)
class InEffect:
    """A subscription's retry schedule (seconds) and timeout in effect, with their sources."""

    retry_schedule: Sequence[float]
    retry_schedule_from: Source
    timeout_seconds: int
    timeout_seconds_from: Source


def in_effect(
    retry_schedule: Sequence[float] | None,
    timeout_seconds: int | None,
    owner_schedule: Sequence[float] | None,
    owner_timeout: int | None,
    service_schedule: Sequence[float],
    service_timeout: int,
) -> InEffect:
    schedule, schedule_from = resolved(retry_schedule, owner_schedule, service_schedule)
    timeout, timeout_from = resolved(timeout_seconds, owner_timeout, service_timeout)
    return InEffect(schedule, schedule_from, timeout, timeout_from)
