"""Server-Sent Events for live pages: `event_stream(events)` answers an async iterable of
`PageEvent`s as `text/event-stream` (sse-starlette: pings keep proxies from closing an idle
stream; the generator is cancelled when the browser goes away). With htmx's sse extension a
page element `sse-swap="NAME"` replaces its content with each `NAME` event's HTML."""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import dataclass

from sse_starlette import EventSourceResponse, ServerSentEvent

DEFAULT_PING_SECONDS = 15


@dataclass(frozen=True)
class PageEvent:
    data: str  # HTML for htmx to swap in, or JSON for a chart
    event: str | None = None
    id: str | None = None


def event_stream(
    events: AsyncIterable[PageEvent], *, ping_seconds: float = DEFAULT_PING_SECONDS
) -> EventSourceResponse:
    async def frames() -> AsyncIterator[ServerSentEvent]:
        async for item in events:
            yield ServerSentEvent(data=item.data, event=item.event, id=item.id)

    return EventSourceResponse(frames(), ping=ping_seconds, headers={"Cache-Control": "no-store"})
