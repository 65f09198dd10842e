"""One process's live streams: notices fan out in memory to the streams of their key, the
streams of a key and view share one read per wake-up, reads are bounded, caps refuse with 429,
and shutdown ends every stream. The notices come over a real NATS server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from servicekit.live import LiveAnnouncer, LiveHub, LiveStream, StreamCaps, TooManyLiveStreams
from servicekit.live.hub import MAX_KEPT_READS, recheck_due
from servicekit.runtime import NatsConnection
from servicekit.settings import ServiceSettings

WIDE = StreamCaps(per_session=1000, per_owner=1000, per_process=1000)


async def first_look(stream: LiveStream) -> None:
    """Consume the look every stream makes when it opens."""
    await anext(aiter(stream.changes()))


async def next_look(stream: LiveStream) -> None:
    await asyncio.wait_for(anext(aiter(stream.changes())), 10)


def opened(hub: LiveHub, key: str, n: int) -> list[LiveStream]:
    return [hub.open(f"session-{i}", f"owner-{i}", key) for i in range(n)]


async def test_a_notice_wakes_every_stream_of_its_key_and_no_other() -> None:
    hub = LiveHub(WIDE, min_interval=0)
    mine, others = opened(hub, "k1", 20), opened(hub, "k2", 5)
    for stream in (*mine, *others):
        await first_look(stream)
    hub.notify(["k1"])
    assert all(stream.pending for stream in mine)
    assert not any(stream.pending for stream in others)


async def test_streams_of_a_key_and_view_share_one_read_per_wake_up() -> None:
    hub = LiveHub(WIDE, min_interval=0)
    streams = opened(hub, "k1", 50)

    async def load() -> str:
        await asyncio.sleep(0)
        return "rows"

    results = await asyncio.gather(*(s.read(("all",), load) for s in streams))
    assert results == ["rows"] * 50
    assert hub.reads_run == 1
    hub.notify(["k1"])
    await asyncio.gather(*(s.read(("all",), load) for s in streams))
    assert hub.reads_run == 2


async def test_each_view_of_a_key_has_its_own_read() -> None:
    hub = LiveHub(WIDE, min_interval=0)
    a, b = opened(hub, "k1", 2)

    async def load() -> int:
        return hub.reads_run

    await asyncio.gather(a.read(("failed",), load), b.read(("succeeded",), load))
    assert hub.reads_run == 2


async def test_reads_at_once_are_bounded_in_the_process() -> None:
    hub = LiveHub(WIDE, concurrent_reads=3, min_interval=0)
    streams = [hub.open(f"s{i}", f"o{i}", f"key-{i}") for i in range(12)]
    running = 0
    most = 0

    async def load() -> None:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await asyncio.sleep(0.01)
        running -= 1

    await asyncio.gather(*(s.read("v", load) for s in streams))
    assert (hub.reads_run, most) == (12, 3)


async def test_a_failed_read_is_tried_again_by_the_next_looker() -> None:
    hub = LiveHub(WIDE, min_interval=0)
    stream = hub.open("s", "o", "k")

    async def failing() -> str:
        raise ConnectionError("database gone")

    async def working() -> str:
        return "rows"

    with pytest.raises(ConnectionError):
        await stream.read("v", failing)
    assert await stream.read("v", working) == "rows"


async def test_a_stream_that_goes_away_does_not_cancel_the_read_others_await() -> None:
    hub = LiveHub(WIDE, min_interval=0)
    leaving, staying = opened(hub, "k", 2)
    release = asyncio.Event()

    async def load() -> str:
        await release.wait()
        return "rows"

    gone = asyncio.create_task(leaving.read("v", load))
    await asyncio.sleep(0)
    waiting = asyncio.create_task(staying.read("v", load))
    await asyncio.sleep(0)
    gone.cancel()
    release.set()
    assert await waiting == "rows"


async def test_changes_within_the_interval_ride_on_one_wake_up() -> None:
    hub = LiveHub(WIDE, min_interval=60)
    stream = hub.open("s", "o", "k")
    await first_look(stream)
    hub.notify(["k"])  # looked at at once
    await next_look(stream)
    hub.notify(["k"])  # within the minute: scheduled, not now
    hub.notify(["k"])
    assert not stream.pending
    stream.close()  # cancels the scheduled wake-up with the last stream


async def test_past_the_session_cap_a_stream_is_refused_with_429() -> None:
    hub = LiveHub(StreamCaps(per_session=2, per_owner=10, per_process=10))
    hub.open("s", "acme", "k")
    hub.open("s", "acme", "k")
    with pytest.raises(TooManyLiveStreams) as refused:
        hub.open("s", "acme", "k")
    assert refused.value.status_code == 429
    assert "2 live views" in str(refused.value)


async def test_closing_a_stream_frees_its_slot_once() -> None:
    hub = LiveHub(StreamCaps(per_session=1, per_owner=10, per_process=10))
    stream = hub.open("s", "acme", "k")
    stream.close()
    stream.close()  # a second close gives nothing back twice
    hub.open("s", "acme", "k")
    assert hub.open_streams == 1


async def test_shutdown_ends_every_stream_and_admits_none() -> None:
    hub = LiveHub(WIDE, min_interval=0)
    streams = opened(hub, "k", 3)
    for stream in streams:
        await first_look(stream)
    await hub.close()
    for stream in streams:
        assert [change async for change in stream.changes()] == []
    with pytest.raises(Exception, match="shutting down"):
        hub.open("late", "acme", "k")


@pytest.fixture
async def nats(kit_settings: ServiceSettings) -> AsyncIterator[NatsConnection]:
    connection = NatsConnection(kit_settings, None)
    connection.start()
    await connection.wait_ready(30)
    yield connection
    await connection.close()


async def test_a_notice_published_on_nats_reaches_the_streams_of_its_key(
    nats: NatsConnection,
) -> None:
    subject = "tests.live.hub"
    hub = LiveHub(WIDE, min_interval=0)
    following = asyncio.create_task(hub.follow(nats, subject))
    try:
        await asyncio.wait_for(hub.following.wait(), 30)
        streams, other = opened(hub, "run-7", 10), hub.open("s", "o", "run-9")
        for stream in (*streams, other):
            await first_look(stream)
        await LiveAnnouncer(nats, subject).changed(["run-7", "run-8"])
        for stream in streams:
            await next_look(stream)
        assert not other.pending
    finally:
        following.cancel()
        await asyncio.gather(following, return_exceptions=True)


def test_a_streams_session_is_checked_again_only_after_the_recheck_interval() -> None:
    assert not recheck_due(checked_at=100.0, now=109.9, every=10.0)
    assert recheck_due(checked_at=100.0, now=110.0, every=10.0)
    assert recheck_due(checked_at=100.0, now=100.0, every=0.0)


async def test_a_stream_whose_session_no_longer_holds_ends_before_its_next_look() -> None:
    hub = LiveHub(StreamCaps(per_session=5, per_owner=5, per_process=5), recheck_seconds=0)
    stream = hub.open("session", "owner", "key")
    holds = [True, False]
    looks = 0

    async def session_holds() -> bool:
        return holds.pop(0)

    async def watch() -> None:
        nonlocal looks
        async for _ in stream.changes(session_holds):
            looks += 1
            stream.wake()

    await asyncio.wait_for(watch(), 5)
    assert looks == 1


async def test_a_quiet_key_keeps_a_bounded_number_of_finished_reads() -> None:
    hub = LiveHub(WIDE, min_interval=0)
    [stream] = opened(hub, "k1", 1)

    async def load() -> str:
        return "rows"

    # Ever new filters on a key that does not change: each a view of its own.
    for n in range(200):
        await stream.read(("filter", n), load)
    assert len(hub._topics["k1"].reads) <= MAX_KEPT_READS
