"""A crawl's frontier: first in, first out; a URL its finder keeps for itself wakes no idle
fetcher (an `asyncio.Queue` woke one per URL, which found nothing left and waited again); a
URL put for others wakes one; a wake is never lost to a taker cancelled before it ran; `join`
ends when every URL put is done."""

from __future__ import annotations

import asyncio

from scraper_manager.crawler.frontier import Frontier


async def settle() -> None:
    """Let every task that can run, run."""
    for _ in range(5):
        await asyncio.sleep(0)


async def test_items_come_out_in_the_order_they_were_put() -> None:
    frontier: Frontier[str] = Frontier()
    for url in ("a", "b", "c"):
        frontier.put(url, wake=url != "b")
    assert [frontier.take_nowait(), await frontier.take(), frontier.take_nowait()] == [
        "a",
        "b",
        "c",
    ]
    assert frontier.take_nowait() is None


async def test_an_item_its_finder_keeps_wakes_no_waiting_fetcher() -> None:
    frontier: Frontier[str] = Frontier()
    waiting = asyncio.create_task(frontier.take())
    await settle()
    frontier.put("kept", wake=False)
    await settle()
    assert not waiting.done()
    assert frontier.take_nowait() == "kept"
    waiting.cancel()


async def test_an_item_put_for_others_wakes_one_waiting_fetcher() -> None:
    frontier: Frontier[str] = Frontier()
    first = asyncio.create_task(frontier.take())
    second = asyncio.create_task(frontier.take())
    await settle()
    frontier.put("shared")
    await settle()
    assert first.done()
    assert first.result() == "shared"
    assert not second.done()
    second.cancel()


async def test_a_wake_passes_on_when_the_woken_fetcher_is_cancelled_before_it_ran() -> None:
    frontier: Frontier[str] = Frontier()
    first = asyncio.create_task(frontier.take())
    second = asyncio.create_task(frontier.take())
    await settle()
    frontier.put("url")
    first.cancel()  # woken, not yet run
    await settle()
    assert first.cancelled()
    assert second.done()
    assert second.result() == "url"


async def test_join_ends_when_every_item_put_is_done() -> None:
    frontier: Frontier[str] = Frontier()
    frontier.put("a")
    frontier.put("b", wake=False)
    joined = asyncio.create_task(frontier.join())
    frontier.take_nowait()
    frontier.task_done()
    await settle()
    assert not joined.done()
    frontier.take_nowait()
    frontier.task_done()
    await settle()
    assert joined.done()
