"""Each request's total time limit (the scraper's `timeout_seconds`), on loop timers shared
by the requests whose deadlines fall in the same second.

aiohttp's `ClientTimeout(total=...)` arms a loop timer per request and disarms it after: at
thousands of requests a second (a revalidating crawl, all answered 304) that is about a
tenth of the worker's CPU per request (`bench/changes_revalidation.py`). aiohttp already
rounds a limit of more than 5 s up to the next whole second of the loop's clock (its
`ceil_threshold`); here the requests of one crawl whose rounded deadlines are the same
second share one timer, which, when it fires, times out those of them still running, as
aiohttp's own would: `TimeoutError` in the request's task (an `asyncio.Timeout`, which
tells a stop's cancellation apart and lets it through). A shorter limit stays exact, with a
timer of its own, as in aiohttp."""

from __future__ import annotations

import asyncio
import math
from types import TracebackType

# aiohttp's `ClientTimeout.ceil_threshold`: limits above it are rounded up to a second.
CEIL_THRESHOLD_SECONDS = 5.0


class Deadlines:
    """The time limits of one crawl's requests (`seconds` each, from its start)."""

    def __init__(
        self,
        seconds: float,
        *,
        resolution: float = 1.0,
        ceil_threshold: float = CEIL_THRESHOLD_SECONDS,
    ) -> None:
        self.seconds = seconds
        # Deadlines are rounded up to a multiple of `resolution` (aiohttp's: a second).
        self.resolution = resolution
        self.ceil_threshold = ceil_threshold
        # Rounded deadline (in resolutions) -> the limits still running that end then.
        self._due: dict[int, set[Limit]] = {}

    def limit(self) -> Limit:
        """A `with` around one request (its connection, its answer, its body)."""
        loop = asyncio.get_running_loop()
        when = loop.time() + self.seconds
        if self.seconds <= self.ceil_threshold:
            limit = Limit(set())
            limit.handle = loop.call_at(when, limit.expire)
            return limit
        tick = math.ceil(when / self.resolution)
        due = self._due.get(tick)
        if due is None:
            due = self._due[tick] = set()
            loop.call_at(tick * self.resolution, self._expire, tick)
        return Limit(due)

    def _expire(self, tick: int) -> None:
        for limit in self._due.pop(tick, ()):
            limit.expire()


class Limit:
    """One request's limit: when it expires (its second's shared timer, or its own) while
    the request runs, the request's task is cancelled and the cancellation leaves the
    `with` as `TimeoutError`; a cancellation from elsewhere (a stop) goes through as it is
    (the task's `cancelling()` count tells them apart, as `asyncio.Timeout` does)."""

    __slots__ = ("_cancelling", "_due", "_expired", "_task", "handle")

    def __init__(self, due: set[Limit]) -> None:
        self._due = due
        self._task: asyncio.Task[object] | None = None
        self._cancelling = 0
        self._expired = False
        self.handle: asyncio.TimerHandle | None = None

    def __enter__(self) -> Limit:
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("a request's time limit is for a task's request")
        self._task = task
        self._cancelling = task.cancelling()
        self._due.add(self)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._due.discard(self)
        if self.handle is not None:
            self.handle.cancel()
        if not self._expired or self._task is None:
            return
        # Our cancel is undone however the request ended: code inside may have turned it into
        # another error, and the task goes on to serve other URLs (as `asyncio.Timeout` does).
        if self._task.uncancel() <= self._cancelling and exc_type is asyncio.CancelledError:
            raise TimeoutError from exc

    def expire(self) -> None:
        # Only a limit entered and not yet left is in a set: its request is running.
        if self._task is not None and self in self._due:
            self._expired = True
            self._task.cancel()
