"""What the live run page computes as it polls: the current request rate, and the answers
by status code."""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass

from scraper_manager.models import Run

# Long enough to span a few of the worker's heartbeats (it writes the counters about once a
# second), short enough to follow a change of pace.
RATE_WINDOW_SECONDS = 3.0


def requests_made(run: Run) -> int:
    """Requests that took a token of the rate limit and were answered: pages fetched, and
    the attempts retried before them."""
    return run.pages_fetched + run.retries


class RateMeter:
    """Requests per second over the last `window` seconds, from samples of a growing count."""

    def __init__(self, window: float = RATE_WINDOW_SECONDS) -> None:
        self.window = window
        self.samples: deque[tuple[float, int]] = deque()

    def add(self, at: float, count: int) -> float | None:
        """Records `count` at monotonic time `at`; the rate, or None until two samples span
        some time."""
        self.samples.append((at, count))
        # Keep one sample at or before the window's start, so the span covers the window.
        while len(self.samples) > 2 and self.samples[1][0] <= at - self.window:
            self.samples.popleft()
        first_at, first_count = self.samples[0]
        if at <= first_at:
            return None
        return round(max(count - first_count, 0) / (at - first_at), 1)


def average_rate(run: Run, seconds: float | None) -> float | None:
    """Requests per second over the whole run (what a run that ended shows)."""
    if not seconds:
        return None
    return round(requests_made(run) / seconds, 1)


@dataclass(frozen=True)
class StatusShare:
    code: str
    answers: int
    percent: float
    kind: str  # what the code means, in words (the badge's colour only helps)
    tone: str


_CLASSES = {
    "2": ("success", "ok"),
    "3": ("redirect", "info"),
    "4": ("client error", "warning"),
    "5": ("server error", "bad"),
}
# What the crawler counts beside status codes (crawler.engine).
_OUTCOMES = {
    "robots_denied": "not fetched: robots.txt",
    "refused": "not fetched: address refused",
    "truncated": "cut at the size limit",
}


# Codes whose class says the wrong thing: a 304 answers a revalidation (its stored items
# were reused), it sends the crawler nowhere.
_CODES = {"304": ("not modified", "ok")}


def _kind(code: str) -> tuple[str, str]:
    if code in _CODES:
        return _CODES[code]
    if len(code) == 3 and code.isdigit() and code[0] in _CLASSES:
        return _CLASSES[code[0]]
    return _OUTCOMES.get(code, "other"), "neutral"


def status_breakdown(counts: Mapping[str, object]) -> list[StatusShare]:
    """A run's answers by HTTP status code (then the crawler's other outcomes), with each
    one's share. Total: a stored value that is not a positive count is left out."""
    kept = {
        str(code): value
        for code, value in counts.items()
        if isinstance(value, int) and not isinstance(value, bool) and value > 0
    }
    total = sum(kept.values())
    ordered = sorted(kept.items(), key=lambda pair: (not pair[0].isdigit(), pair[0]))
    return [
        StatusShare(code, answers, round(100 * answers / total, 1), *_kind(code))
        for code, answers in ordered
    ]
