"""Group commit: what concurrent callers of one process write goes to the database together.

Each caller awaits `submit(item)` and gets its own result (or its own error). Items wait in a
queue while a flush is in flight; when it returns, everything queued (up to `max_items`)
goes in the next flush: one transaction and a few statements for all of them, where each
caller would otherwise pay its own BEGIN, statements, COMMIT and fsync. Nothing is held back
on purpose: an idle batcher flushes the first item at once, so a lone caller waits for one
flush, and under load the batches grow by themselves to what arrives during one flush
(PostgreSQL's own group commit of WAL works the same way).

A caller is answered only after its flush returned, so a result means committed. A flush that
raises fails only its own items: an outage (`servicekit.loops.is_outage`: the database could
not be reached) fails them all with what `on_outage` makes of it, since the next item would
fail alike; any other error is taken for one item's fault, and the items are flushed again
one by one, so only the item that raises alone fails (with its own error).
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

from servicekit.loops import is_outage

Item = TypeVar("Item")
Result = TypeVar("Result")

# A flush returns one result per item, in order.
Flush = Callable[[Sequence[Item]], Awaitable[Sequence[Result]]]


class GroupCommit(Generic[Item, Result]):
    def __init__(
        self,
        flush: Flush[Item, Result],
        *,
        max_items: int = 500,
        on_outage: Callable[[BaseException], BaseException] = lambda exc: exc,
    ) -> None:
        self._flush = flush
        self._max_items = max_items
        self._on_outage = on_outage
        self._queue: list[tuple[Item, asyncio.Future[Result]]] = []
        self._flusher: asyncio.Task[None] | None = None
        self._closed = False
        # Items and flushes so far: how the items were grouped.
        self.items = 0
        self.flushes = 0

    async def submit(self, item: Item) -> Result:
        """`item`'s result once its flush has returned; its error raised."""
        if self._closed:
            raise RuntimeError("group commit closed")
        future: asyncio.Future[Result] = asyncio.get_running_loop().create_future()
        self._queue.append((item, future))
        if self._flusher is None:
            # In a context of its own: the flush belongs to no one request (its spans and log
            # lines would otherwise carry the trace and request id of whichever came first).
            self._flusher = asyncio.create_task(
                self._run(), name="group-commit", context=contextvars.Context()
            )
        # Shielded: a caller that goes away (a client hanging up) leaves its item in the
        # flush, which must answer every other item of it.
        return await asyncio.shield(future)

    async def close(self) -> None:
        """Refuse new items and wait for the queued ones to be flushed."""
        self._closed = True
        if self._flusher is not None:
            await asyncio.shield(self._flusher)

    async def _run(self) -> None:
        try:
            while self._queue:
                batch = self._queue[: self._max_items]
                del self._queue[: self._max_items]
                try:
                    await self._flush_batch(batch)
                except BaseException:
                    # Cancelled mid-flush (the process stopping): whether it committed is not
                    # known, and no caller may be left waiting.
                    for _, future in batch:
                        _settle(future, error=RuntimeError("group commit stopped"))
                    raise
        finally:
            self._flusher = None
            if self._queue:  # cancelled with items queued: nobody else will flush them
                for _, future in self._queue:
                    _settle(future, error=RuntimeError("group commit stopped"))
                self._queue.clear()

    async def _flush_batch(self, batch: list[tuple[Item, asyncio.Future[Result]]]) -> None:
        self.flushes += 1
        self.items += len(batch)
        try:
            results = await self._flush([item for item, _ in batch])
        except Exception as exc:
            if is_outage(exc):
                for _, future in batch:
                    _settle(future, error=self._on_outage(exc))
            elif len(batch) == 1:
                _settle(batch[0][1], error=exc)
            else:
                # Whose fault it was is found by flushing each alone.
                for single in batch:
                    await self._flush_batch([single])
            return
        if len(results) != len(batch):
            error = RuntimeError(f"flush answered {len(results)} results for {len(batch)} items")
            for _, future in batch:
                _settle(future, error=error)
            return
        for (_, future), result in zip(batch, results, strict=True):
            _settle(future, result=result)


def _settle(
    future: asyncio.Future[Result],
    *,
    result: Result | None = None,
    error: BaseException | None = None,
) -> None:
    if future.done():  # its caller was cancelled
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)  # type: ignore[arg-type]
