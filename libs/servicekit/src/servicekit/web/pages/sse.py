"""Server-Sent Events for live pages: `event_stream(events)` answers an async iterable of
`PageEvent`s as `text/event-stream` (sse-starlette: pings keep proxies from closing an idle
stream; the generator is cancelled when the browser goes away). With htmx's sse extension a
page element `sse-swap="NAME"` replaces its content with each `NAME` event's HTML.

`on_close` runs once the response is over, however it ends (the stream's end, the browser gone,
shutdown, an error): a live stream's slot is given back there, not in the generator, whose
`finally` never runs when it is never started. `on_shutdown` runs when the server is told to
stop (SIGTERM): it should make `events` end, so the response ends as a complete one (the last
chunk sent) instead of being cut when sse-starlette cancels it `SHUTDOWN_GRACE_SECONDS` later."""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Callable
from dataclasses import dataclass
from typing import cast

import anyio
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.types import Receive, Scope, Send

DEFAULT_PING_SECONDS = 15
SHUTDOWN_GRACE_SECONDS = 5.0


@dataclass(frozen=True)
class PageEvent:
    data: str  # HTML for htmx to swap in, or JSON for a chart
    event: str | None = None
    id: str | None = None


class _Call:
    """What sse-starlette is given as its shutdown event: it only ever calls `set()` on it (when
    the server is stopping), so a callback stands in for an event nobody would wait on."""

    def __init__(self, callback: Callable[[], None]) -> None:
        self.set = callback


class _ClosingEventSourceResponse(EventSourceResponse):
    def __init__(
        self,
        frames: AsyncIterator[ServerSentEvent],
        ping: float,
        on_close: Callable[[], None],
        on_shutdown: Callable[[], None] | None,
    ) -> None:
        super().__init__(
            frames,
            ping=ping,
            headers={"Cache-Control": "no-store"},
            shutdown_event=None if on_shutdown is None else cast("anyio.Event", _Call(on_shutdown)),
            shutdown_grace_period=0 if on_shutdown is None else SHUTDOWN_GRACE_SECONDS,
        )
        self._on_close = on_close

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._on_close()


def event_stream(
    events: AsyncIterable[PageEvent],
    *,
    ping_seconds: float = DEFAULT_PING_SECONDS,
    on_close: Callable[[], None] | None = None,
    on_shutdown: Callable[[], None] | None = None,
) -> EventSourceResponse:
    async def frames() -> AsyncIterator[ServerSentEvent]:
        async for item in events:
            yield ServerSentEvent(data=item.data, event=item.event, id=item.id)

    if on_close is not None:
        return _ClosingEventSourceResponse(frames(), ping_seconds, on_close, on_shutdown)
    return EventSourceResponse(frames(), ping=ping_seconds, headers={"Cache-Control": "no-store"})
