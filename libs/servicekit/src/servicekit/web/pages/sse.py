"""Server-Sent Events for live pages: `event_stream(events)` answers an async iterable of
`PageEvent`s as `text/event-stream` (sse-starlette: pings keep proxies from closing an idle
stream; the generator is cancelled when the browser goes away). With htmx's sse extension a
page element `sse-swap="NAME"` replaces its content with each `NAME` event's HTML.

`on_close` runs once the response is over, however it ends (the stream's end, the browser gone,
shutdown, an error): a live stream's slot is given back there, not in the generator, whose
`finally` never runs when it is never started."""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Callable
from dataclasses import dataclass

from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.types import Receive, Scope, Send

DEFAULT_PING_SECONDS = 15


@dataclass(frozen=True)
class PageEvent:
    data: str  # HTML for htmx to swap in, or JSON for a chart
    event: str | None = None
    id: str | None = None


class _ClosingEventSourceResponse(EventSourceResponse):
    def __init__(
        self, frames: AsyncIterator[ServerSentEvent], ping: float, on_close: Callable[[], None]
    ) -> None:
        super().__init__(frames, ping=ping, headers={"Cache-Control": "no-store"})
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
) -> EventSourceResponse:
    async def frames() -> AsyncIterator[ServerSentEvent]:
        async for item in events:
            yield ServerSentEvent(data=item.data, event=item.event, id=item.id)

    if on_close is not None:
        return _ClosingEventSourceResponse(frames(), ping_seconds, on_close)
    return EventSourceResponse(frames(), ping=ping_seconds, headers={"Cache-Control": "no-store"})
