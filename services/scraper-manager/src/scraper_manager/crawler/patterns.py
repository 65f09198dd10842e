"""`follow: "re:<pattern>"`, compiled by RE2: matching time is linear in the link's length
whatever the pattern, so no pattern can stall a worker (Python's `re` backtracks:
`(a+)+$` on 29 a's took 33 s). Syntax RE2 cannot run in linear time (back-references,
look-around) is refused when the scraper is stored."""

from __future__ import annotations

from typing import Protocol, cast

import re2  # type: ignore[import-untyped]

MAX_PATTERN_MEMORY = 8 << 20


class LinkPattern(Protocol):
    def search(self, text: str) -> object | None: ...


def _options() -> object:
    options = re2.Options()
    options.max_mem = MAX_PATTERN_MEMORY
    options.log_errors = False
    return options


def compile_pattern(pattern: str) -> LinkPattern:
    """The pattern compiled by RE2, or ValueError naming what RE2 refused."""
    try:
        return cast("LinkPattern", re2.compile(pattern, _options()))
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        if isinstance(reason, bytes):
            reason = reason.decode(errors="replace")
        raise ValueError(
            f"follow pattern is not supported by the linear-time (RE2) engine: {reason}"
        ) from None
