"""Reading a live page's Server-Sent Events stream over real HTTP, as a browser does."""

from __future__ import annotations

import asyncio
import contextlib

import httpx


class SseFeed:
    """One open stream, read event by event (comment lines, the heartbeats, skipped)."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self._lines = response.aiter_lines()

    async def next_event(self) -> tuple[str | None, str]:
        """The next event's name and data; EOFError once the server ended the stream."""
        event: str | None = None
        data: list[str] = []
        async for line in self._lines:
            if not line:
                if data:
                    return event, "\n".join(data)
                continue
            if line.startswith("event:"):
                event = line.removeprefix("event:").strip()
            elif line.startswith("data:"):
                data.append(line.removeprefix("data:").removeprefix(" "))
        raise EOFError("the stream ended")

    async def until(self, wanted: str, timeout: float = 30.0) -> str:
        """The data of the first event that mentions `wanted`."""
        while True:
            _, data = await asyncio.wait_for(self.next_event(), timeout)
            if wanted in data:
                return data


async def open_feed(
    stack: contextlib.AsyncExitStack, client: httpx.AsyncClient, url: str
) -> SseFeed:
    """A stream opened on `url`, its first event read (a live page's first look). It stays open
    while the caller keeps the feed and `stack` is open: a feed that is collected closes its
    line reader, and with it the connection."""
    response = await stack.enter_async_context(client.stream("GET", url))
    assert response.status_code == 200, (await response.aread()).decode()
    feed = SseFeed(response)
    await asyncio.wait_for(feed.next_event(), 30)
    return feed
