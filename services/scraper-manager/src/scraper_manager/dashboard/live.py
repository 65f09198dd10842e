"""What the live run page computes as it polls: the current request rate."""

from __future__ import annotations

from collections import deque

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
