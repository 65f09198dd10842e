"""Ordered delivery by key (issue 32, item 3): what a subscription's `ordering` says, and an
event's key under it. Pure: no I/O.

A subscription with `ordering` has its deliveries attempted one at a time per key, in the
order their events were published (their JetStream stream sequence). The key is the value of
a CEL expression over the event, as text; no expression (`{"key": null}` or `{}`): the whole
subscription is one sequence, the empty key. An expression that fails for an event, or gives
no usable key (not a string, integer or boolean; or empty), puts the event in the fallback
sequence, which is the empty key too: such events keep their order among themselves.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

# A key is stored as text, at most this long: longer keys are cut (two keys cut to the same
# text share a sequence: order kept, less parallelism).
KEY_MAX_CHARS = 200
# The whole subscription's sequence (no key expression), and the fallback of events whose
# key cannot be had.
FALLBACK_KEY = ""


class KeyExpression(Protocol):
    """A compiled CEL expression (webhook_hub.expressions)."""

    def evaluate(self, event: Any) -> Any: ...


@dataclass(frozen=True, slots=True)
class Ordering:
    """A subscription's `ordering`: `key` is the CEL source, or None (one sequence)."""

    key: str | None


def parse_ordering(value: object) -> Ordering | None:
    """The stored `ordering` (JSON) read; total. None: unordered. A value that is not what
    the API stores (written by hand) is ordered as one sequence: never unordered by mistake."""
    if value is None:
        return None
    if isinstance(value, Mapping):
        key = value.get("key")
        if key is None or (isinstance(key, str) and key.strip()):
            return Ordering(key if isinstance(key, str) else None)
    return Ordering(None)


def key_text(value: object) -> str | None:
    """An expression's value as a key's text, or None when it cannot be one."""
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, int):
        text = str(value)
    elif isinstance(value, str):
        text = value
    else:
        return None
    return text[:KEY_MAX_CHARS] or None


def key_of(expression: KeyExpression | None, event: Any) -> tuple[str, str | None]:
    """The event's key under `expression` (None: the one sequence) and, when it falls back,
    why (for the one log line dispatch writes)."""
    if expression is None:
        return FALLBACK_KEY, None
    try:
        value = expression.evaluate(event)
    except Exception as exc:
        return FALLBACK_KEY, f"{type(exc).__name__}: {str(exc)[:200]}"
    text = key_text(value)
    if text is None:
        if value == "":
            return FALLBACK_KEY, "the key is empty"
        return FALLBACK_KEY, f"the key is {type(value).__name__}, not a string or integer"
    return text, None
