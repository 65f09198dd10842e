"""servicekit.group_commit: concurrent callers' items flushed together, each caller answered
with its own result once its flush returned; a failing flush fails only its own items."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest
from servicekit.group_commit import GroupCommit


class Store:
    """A flush that records the batches it was given and answers each item doubled; items
    it cannot take (`refused`) make the whole flush raise, as a bad row fails a statement."""

    def __init__(self, refused: frozenset[int] = frozenset()) -> None:
        self.batches: list[list[int]] = []
        self.refused = refused
        self.release = asyncio.Event()
        self.release.set()

    async def flush(self, items: Sequence[int]) -> list[int]:
        await self.release.wait()
        if self.refused & set(items):
            raise ValueError(f"cannot store {sorted(self.refused & set(items))}")
        self.batches.append(list(items))
        return [item * 2 for item in items]


class Unreachable(Exception):
    pass


async def test_concurrent_items_go_in_one_flush_and_each_caller_gets_its_own_result() -> None:
    store = Store()
    commits: GroupCommit[int, int] = GroupCommit(store.flush)
    results = await asyncio.gather(*(commits.submit(n) for n in range(5)))
    assert results == [0, 2, 4, 6, 8]
    assert store.batches == [[0, 1, 2, 3, 4]]


async def test_items_arriving_during_a_flush_go_together_in_the_next() -> None:
    store = Store()
    store.release.clear()
    commits: GroupCommit[int, int] = GroupCommit(store.flush)
    first = asyncio.create_task(commits.submit(1))
    await asyncio.sleep(0)  # the first flush has started, and waits
    later = [asyncio.create_task(commits.submit(n)) for n in (2, 3, 4)]
    await asyncio.sleep(0)
    store.release.set()
    assert await asyncio.gather(first, *later) == [2, 4, 6, 8]
    assert store.batches == [[1], [2, 3, 4]]


async def test_a_flush_takes_at_most_max_items() -> None:
    store = Store()
    commits: GroupCommit[int, int] = GroupCommit(store.flush, max_items=2)
    await asyncio.gather(*(commits.submit(n) for n in range(5)))
    assert store.batches == [[0, 1], [2, 3], [4]]


async def test_an_item_that_fails_its_flush_fails_alone_and_the_others_are_flushed() -> None:
    store = Store(refused=frozenset({3}))
    commits: GroupCommit[int, int] = GroupCommit(store.flush)
    results = await asyncio.gather(*(commits.submit(n) for n in range(5)), return_exceptions=True)
    assert results[:3] == [0, 2, 4]
    assert isinstance(results[3], ValueError)
    assert results[4] == 8
    assert store.batches == [[0], [1], [2], [4]]


async def test_an_outage_fails_every_item_of_the_flush_with_the_outage_error() -> None:
    async def unreachable(items: Sequence[int]) -> list[int]:
        raise ConnectionRefusedError("database down")

    commits: GroupCommit[int, int] = GroupCommit(unreachable, on_outage=lambda _: Unreachable())
    results = await asyncio.gather(*(commits.submit(n) for n in range(3)), return_exceptions=True)
    assert all(isinstance(result, Unreachable) for result in results)
    assert commits.flushes == 1  # not tried again item by item


async def test_a_closed_group_commit_flushes_what_is_queued_and_refuses_more() -> None:
    store = Store()
    store.release.clear()
    commits: GroupCommit[int, int] = GroupCommit(store.flush)
    pending = [asyncio.create_task(commits.submit(n)) for n in (1, 2)]
    await asyncio.sleep(0)
    closing = asyncio.create_task(commits.close())
    store.release.set()
    await closing
    assert await asyncio.gather(*pending) == [2, 4]
    with pytest.raises(RuntimeError):
        await commits.submit(3)
