"""A cron expression in words, for the shapes schedules usually take; anything else is shown
as the expression itself (None here), never as a guess."""

from __future__ import annotations

DAYS = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")
ALIASES = {
    "@hourly": "0 * * * *",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *",
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
}


def _number(field: str, low: int, high: int) -> int | None:
    return int(field) if field.isdigit() and low <= int(field) <= high else None


def _step(field: str) -> int | None:
    """N of `*/N`."""
    if field.startswith("*/"):
        return _number(field[2:], 1, 59)
    return None


def _days(field: str) -> str | None:
    if field in ("1-5", "MON-FRI", "mon-fri"):
        return "every weekday"
    if field in ("0,6", "6,0", "SAT,SUN", "sat,sun"):
        return "every Saturday and Sunday"
    numbers = [_number(part, 0, 7) for part in field.split(",")]
    if not numbers or any(n is None for n in numbers):
        return None
    names = [DAYS[n % 7] for n in numbers if n is not None]
    joined = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    return f"every {joined}"


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def describe(schedule: str) -> str | None:
    """E.g. "0 6 * * 1-5" -> "every weekday at 06:00"; None for shapes not covered."""
    fields = ALIASES.get(schedule.strip(), schedule).split()
    if len(fields) != 5:
        return None
    minute, hour, day, month, weekday = fields
    if month != "*":
        return None
    if (minute, hour, day, weekday) == ("*", "*", "*", "*"):
        return "every minute"
    every_minutes = _step(minute)
    if every_minutes and (hour, day, weekday) == ("*", "*", "*"):
        return f"every {every_minutes} minutes"
    m = _number(minute, 0, 59)
    if m is None:
        return None
    every_hours = _step(hour)
    if (day, weekday) != ("*", "*") and (hour == "*" or every_hours):
        return None
    if hour == "*":
        return f"every hour at {m} minutes past" if m else "every hour"
    if every_hours:
        past = f", {m} minutes past" if m else ""
        return f"every {every_hours} hours{past}"
    h = _number(hour, 0, 23)
    if h is None:
        return None
    at = f"at {h:02d}:{m:02d}"
    if day == "*" and weekday == "*":
        return f"every day {at}"
    if day == "*":
        days = _days(weekday)
        return f"{days} {at}" if days else None
    d = _number(day, 1, 31)
    if d is not None and weekday == "*":
        return f"on the {_ordinal(d)} of every month {at}"
    return None
