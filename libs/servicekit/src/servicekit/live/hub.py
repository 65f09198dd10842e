"""One process's live streams, fanned out from one source.

A process subscribes once to its service's change notices (a core NATS subject); a notice
names keys (a subscription's id, a run's id) and wakes, in memory, the streams open on them.
No stream holds or polls a database connection: woken, a stream asks `read` for its view, and
every stream of the same key and view shares one read per wake-up (the first one runs it, the
others await its result), at most `concurrent_reads` of them at a time in the process, so
thousands of open streams leave the connection pool to the pages and the API.

The caps (per session, per owner, per process) are `admission.StreamCounts`'s; past one,
`open` raises `TooManyLiveStreams` (429) before anything streams.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable, Iterable
from typing import Any, TypeVar

import structlog
from nats.aio.msg import Msg

from servicekit.errors import RateLimited, ServiceUnavailable
from servicekit.live.admission import (
    CapReached,
    StreamCaps,
    StreamCounts,
    fire_delay,
    refusal_text,
)
from servicekit.live.notices import parse_keys
from servicekit.runtime import NatsConnection

logger = structlog.get_logger(__name__)

T = TypeVar("T")

DEFAULT_CONCURRENT_READS = 4
DEFAULT_MIN_INTERVAL_SECONDS = 1.0
# Finished reads one key keeps for its streams (one per view: filters, position).
MAX_KEPT_READS = 16
# An open stream's session is checked again at most this often (before a look).
DEFAULT_RECHECK_SECONDS = 10.0
# How often the source's connection is looked at: notices sent while it was down are lost, so
# every stream looks again once it is back.
CONNECTION_CHECK_SECONDS = 1.0


class TooManyLiveStreams(RateLimited):
    code = "too_many_live_streams"

    def __init__(self, cap: CapReached, caps: StreamCaps) -> None:
        super().__init__(refusal_text(cap, caps))
        self.cap = cap


class _Topic:
    """The streams open on one key, and the reads they share until the next wake-up."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.streams: set[LiveStream] = set()
        # Each read was started after the key's last wake-up, so it is fresh for every stream.
        self.reads: dict[Hashable, asyncio.Task[Any]] = {}
        self.last_fired = -math.inf
        self.timer: asyncio.TimerHandle | None = None

    def fire(self) -> None:
        self.timer = None
        self.last_fired = asyncio.get_running_loop().time()
        self.reads.clear()
        for stream in self.streams:
            stream.wake()


class LiveStream:
    """An admitted stream on one key: `changes()` yields once at once (the first look) and then
    after each change of the key, and ends when the process shuts down; `close()` gives its
    slot back (idempotent; the response calls it when the stream ends, however it ends)."""

    def __init__(self, hub: LiveHub, topic: _Topic, session_id: str, owner: str) -> None:
        self._hub = hub
        self._topic = topic
        self.session_id = session_id
        self.owner = owner
        # Its session was checked as it opened.
        self._checked_at = time.monotonic()
        self._woken = asyncio.Event()
        self._woken.set()
        self._ended = False
        self.closed = False

    @property
    def key(self) -> str:
        return self._topic.key

    @property
    def pending(self) -> bool:
        """A look is due (a change came since the last one)."""
        return self._woken.is_set()

    def wake(self) -> None:
        self._woken.set()

    def again(self) -> None:
        """Look again at once (the last read was cut at its limit: more is there)."""
        self._woken.set()

    def end(self) -> None:
        self._ended = True
        self._woken.set()

    async def changes(
        self, session_holds: Callable[[], Awaitable[bool]] | None = None
    ) -> AsyncIterator[None]:
        """Once at once, then once after each change, until the process shuts down. Before
        a look, at most every `recheck_seconds`, `session_holds()` is asked whether the
        stream's session still holds: signing out, a revoked key or a changed level end the
        stream instead of letting it show more."""
        while True:
            await self._woken.wait()
            if self._ended:
                return
            self._woken.clear()
            if session_holds is not None:
                now = time.monotonic()
                if recheck_due(self._checked_at, now, self._hub.recheck_seconds):
                    self._checked_at = now
                    if not await session_holds():
                        return
            yield None

    async def read(self, view: Hashable, load: Callable[[], Awaitable[T]]) -> T:
        """`load()`'s result for `view` (what the stream shows: its filters, its position),
        shared with the key's other streams of the same view since the last wake-up."""
        return await self._hub._shared_read(self._topic, view, load)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._hub._leave(self)


def recheck_due(checked_at: float, now: float, every: float) -> bool:
    """Whether a stream's session, last checked at `checked_at`, is due to be checked again
    (a look at most every `every` seconds: a look per change of a busy key would be a query
    per change and stream)."""
    return now - checked_at >= every


class LiveHub:
    def __init__(
        self,
        caps: StreamCaps,
        *,
        concurrent_reads: int = DEFAULT_CONCURRENT_READS,
        min_interval: float = DEFAULT_MIN_INTERVAL_SECONDS,
        recheck_seconds: float = DEFAULT_RECHECK_SECONDS,
    ) -> None:
        self._counts = StreamCounts(caps)
        self.recheck_seconds = recheck_seconds
        self._topics: dict[str, _Topic] = {}
        self._reads = asyncio.Semaphore(concurrent_reads)
        self._min_interval = min_interval
        self._closed = False
        self.following = asyncio.Event()  # set once the notices' subscription is in place
        self.reads_run = 0  # loads actually run (the tests and the bench count them)

    @property
    def open_streams(self) -> int:
        return self._counts.total

    def counts(self) -> StreamCounts:
        return self._counts

    def open(self, session_id: str, owner: str, key: str) -> LiveStream:
        """Admit a stream on `key` for this session and owner, or refuse it (429)."""
        if self._closed:
            raise ServiceUnavailable("The service is shutting down: reload this page.")
        refused = self._counts.admit(session_id, owner)
        if refused is not None:
            raise TooManyLiveStreams(refused, self._counts.caps)
        topic = self._topics.get(key)
        if topic is None:
            topic = self._topics[key] = _Topic(key)
        stream = LiveStream(self, topic, session_id, owner)
        topic.streams.add(stream)
        return stream

    def notify(self, keys: Iterable[str]) -> None:
        """Keys changed: wake their streams (at most once per `min_interval` per key)."""
        loop = asyncio.get_running_loop()
        for key in keys:
            topic = self._topics.get(key)
            if topic is None or topic.timer is not None:
                continue  # nobody watches it, or a wake-up is on its way already
            delay = fire_delay(topic.last_fired, loop.time(), self._min_interval)
            if delay <= 0:
                topic.fire()
            else:
                topic.timer = loop.call_later(delay, topic.fire)

    def resync(self) -> None:
        """Every stream looks again (notices may have been lost)."""
        self.notify(list(self._topics))

    async def follow(self, nats: NatsConnection, subject: str) -> None:
        """The process's one subscription to the change notices, until cancelled."""

        async def on_notice(msg: Msg) -> None:
            self.notify(parse_keys(msg.data))

        await nats.wait_ready()
        subscription = await nats.client.subscribe(subject, cb=on_notice)
        try:
            self.resync()  # what changed before the subscription was in place
            self.following.set()
            connected = True
            while True:
                await asyncio.sleep(CONNECTION_CHECK_SECONDS)
                now_connected = nats.is_connected
                if now_connected and not connected:
                    self.resync()
                connected = now_connected
        finally:
            self.following.clear()
            with contextlib.suppress(Exception):
                await subscription.unsubscribe()

    async def close(self) -> None:
        """Shutdown: every stream ends (its response closes cleanly); no new one is admitted."""
        self._closed = True
        for topic in self._topics.values():
            if topic.timer is not None:
                topic.timer.cancel()
            for stream in topic.streams:
                stream.end()

    def _leave(self, stream: LiveStream) -> None:
        self._counts.release(stream.session_id, stream.owner)
        topic = stream._topic
        topic.streams.discard(stream)
        if not topic.streams and self._topics.get(topic.key) is topic:
            if topic.timer is not None:
                topic.timer.cancel()
            del self._topics[topic.key]

    async def _shared_read(
        self, topic: _Topic, view: Hashable, load: Callable[[], Awaitable[T]]
    ) -> T:
        task = topic.reads.get(view)
        if task is None:
            if len(topic.reads) >= MAX_KEPT_READS:
                # Finished reads are kept for the streams of this wake-up still to look, until
                # the key's next change; a stream opened and closed with ever new filters
                # would otherwise grow them without end on a quiet key.
                for kept, done in list(topic.reads.items()):
                    if done.done():
                        del topic.reads[kept]
            task = asyncio.create_task(self._bounded(load))
            topic.reads[view] = task
            task.add_done_callback(lambda done: _forget_failed(topic, view, done))
        # Shielded: a stream that goes away does not cancel the read the others await.
        result: T = await asyncio.shield(task)
        return result

    async def _bounded(self, load: Callable[[], Awaitable[T]]) -> T:
        async with self._reads:
            self.reads_run += 1
            return await load()


def _forget_failed(topic: _Topic, view: Hashable, task: asyncio.Task[Any]) -> None:
    """A failed read is not shared with later lookers (they try again)."""
    failed = task.cancelled() or task.exception() is not None  # (retrieved: never unlogged)
    if failed and topic.reads.get(view) is task:
        del topic.reads[view]
