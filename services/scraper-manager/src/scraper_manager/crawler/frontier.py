"""A crawl's frontier: the URLs found and not yet taken, shared by its fetchers.

An `asyncio.Queue` wakes an idle fetcher for every URL put, even one the fetcher that found
it takes itself at once (it finds the queue not empty when its page is done): on a site whose
pages each add a link or two, every page then woke a fetcher for nothing (its task resumed,
found the queue empty, waited again). Here the finder of new URLs keeps one of them for itself
(`put(..., wake=False)`, at most one a page) and only the others wake a fetcher. Same order
(first in, first out), same `task_done` / `join` accounting as the queue's.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Generic, TypeVar

T = TypeVar("T")


class Frontier(Generic[T]):
    def __init__(self) -> None:
        self._items: deque[T] = deque()
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._unfinished = 0
        self._finished = asyncio.Event()
        self._finished.set()

    def __len__(self) -> int:
        return len(self._items)

    def put(self, item: T, *, wake: bool = True) -> None:
        """`wake=False` only for an item whose putter comes back for the next item without
        waiting (it takes this one, or another while this one waits its turn)."""
        self._items.append(item)
        self._unfinished += 1
        self._finished.clear()
        if wake:
            self._wake_one()

    def take_nowait(self) -> T | None:
        """The next item, or None when there is none (items are never None)."""
        return self._items.popleft() if self._items else None

    async def take(self) -> T:
        items = self._items
        while not items:
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            except BaseException:
                waiter.cancel()
                if items and not waiter.cancelled():
                    # Woken, then cancelled before it ran: the wake goes to another.
                    self._wake_one()
                raise
        return items.popleft()

    def _wake_one(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def task_done(self) -> None:
        self._unfinished -= 1
        if self._unfinished == 0:
            self._finished.set()

    async def join(self) -> None:
        """Until every item put has been marked done."""
        await self._finished.wait()
